// gg_connect_wait: a worker that starts before its gateway, or restarts before the gateway has
// seen its predecessor leave, waits for it; what can never succeed fails at once.
#include <chrono>
#include <future>
#include <string>

#include "ingress_fixture.h"

namespace gradgate::gateway::testing {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

struct Connected {
  gg_status status = GG_INTERNAL;
  gg_client* client = nullptr;
  std::string error;
};

// gg_connect_wait on its own thread (so that the test can change the gateway meanwhile).
std::future<Connected> connect_wait_async(const std::string& path, uint32_t local_rank) {
  return std::async(std::launch::async, [path, local_rank] {
    Connected connected;
    connected.status = gg_connect_wait(path.c_str(), local_rank, 20000, &connected.client);
    connected.error = gg_last_error();
    return connected;
  });
}

TEST_F(IngressTest, ConnectWaitGivesUpAfterItsTimeoutNamingWhatItWaitedFor) {
  const std::string missing = dir_.path() + "/missing.sock";
  gg_client* client = nullptr;
  const auto start = Clock::now();
  EXPECT_EQ(gg_connect_wait(missing.c_str(), 0, 300, &client), GG_CONNECT_FAILED);
  EXPECT_GE(Clock::now() - start, milliseconds(300));
  EXPECT_EQ(client, nullptr);
  const std::string error = gg_last_error();
  EXPECT_NE(error.find("missing.sock"), std::string::npos) << error;
  EXPECT_NE(error.find("No such file"), std::string::npos) << error;
  EXPECT_NE(error.find("attempts over"), std::string::npos) << error;
}

TEST_F(IngressTest, ConnectWaitWaitsUntilTheRankIsFree) {
  gg_client* first = connect(1);
  ASSERT_NE(first, nullptr);
  auto second = connect_wait_async(socket_path_, 1);
  // The waiting worker has been refused at least twice before the first one leaves.
  ASSERT_TRUE(poll_until([&] { return server_->stats().workers_refused >= 2; }));
  EXPECT_EQ(second.wait_for(milliseconds(0)), std::future_status::timeout);
  ASSERT_EQ(gg_close(first), GG_OK);

  const Connected connected = second.get();
  ASSERT_EQ(connected.status, GG_OK) << connected.error;
  EXPECT_TRUE(handler_.wait_until([&] { return handler_.connected.contains(1); }));
  EXPECT_EQ(gg_close(connected.client), GG_OK);
}

TEST_F(IngressTest, ConnectWaitWaitsForAGatewayThatStartsLater) {
  server_->stop();
  auto waiting = connect_wait_async(socket_path_, 0);
  auto restarted = make_unix_ingress_server(socket_path_);
  DoublingHandler handler;
  ASSERT_TRUE(restarted->start(handler).ok());

  const Connected connected = waiting.get();
  ASSERT_EQ(connected.status, GG_OK) << connected.error;
  EXPECT_TRUE(handler.wait_until([&] { return handler.connected.contains(0); }));
  EXPECT_EQ(gg_close(connected.client), GG_OK);
  restarted->stop();
}

TEST_F(IngressTest, ConnectWaitDoesNotWaitForARankThatCanNeverJoin) {
  gg_client* client = nullptr;
  const auto start = Clock::now();
  EXPECT_EQ(gg_connect_wait(socket_path_.c_str(), 7, 20000, &client), GG_REJECTED);
  EXPECT_LT(Clock::now() - start, milliseconds(10000));
  EXPECT_NE(std::string(gg_last_error()).find("local rank 7 is not below 4"), std::string::npos)
      << gg_last_error();
  EXPECT_EQ(server_->stats().workers_refused, 1u);
}

TEST_F(IngressTest, ConnectWaitChecksItsArgumentsAtOnce) {
  gg_client* client = nullptr;
  EXPECT_EQ(gg_connect_wait("", 0, 20000, &client), GG_INVALID_ARGUMENT);
  EXPECT_EQ(gg_connect_wait(socket_path_.c_str(), 0, 20000, nullptr), GG_INVALID_ARGUMENT);
  EXPECT_EQ(server_->stats().sessions_opened, 0u);
}

}  // namespace
}  // namespace gradgate::gateway::testing
