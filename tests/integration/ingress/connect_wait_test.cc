// gg_connect_wait: a worker that starts before its gateway, or restarts before the gateway has
// seen its predecessor leave, waits for it; what can never succeed fails at once; no attempt
// outlasts the time given, whatever the socket does.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <thread>

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

// A socket bound at `path` that listens (with `backlog`) when asked, and never accepts or
// answers; closed by the destructor. Without listening it is a stale socket file.
class SilentSocket {
 public:
  SilentSocket(const std::string& path, bool listening, int backlog = 16) {
    fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
    ok_ = fd_ >= 0 && bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0 &&
          (!listening || listen(fd_, backlog) == 0);
  }
  ~SilentSocket() { close(fd_); }
  bool ok() const { return ok_; }
  /// Accepts one connection and closes it unanswered; false if none came within 10 s.
  bool accept_and_close() {
    pollfd ready{.fd = fd_, .events = POLLIN, .revents = 0};
    if (poll(&ready, 1, 10000) != 1) return false;
    const int connection = accept(fd_, nullptr, nullptr);
    if (connection < 0) return false;
    close(connection);
    return true;
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

TEST_F(IngressTest, ConnectWaitTimesOutNamingTheAttemptsAndTheLastFailure) {
  const std::string missing = dir_.path() + "/missing.sock";
  gg_client* client = nullptr;
  const auto start = Clock::now();
  EXPECT_EQ(gg_connect_wait(missing.c_str(), 0, 300, &client), GG_TIMEOUT);
  EXPECT_GE(Clock::now() - start, milliseconds(300));
  EXPECT_EQ(client, nullptr);
  const std::string error = gg_last_error();
  EXPECT_NE(error.find("missing.sock"), std::string::npos) << error;
  EXPECT_NE(error.find("attempts over"), std::string::npos) << error;
  EXPECT_NE(error.find("connect_failed"), std::string::npos) << error;
  EXPECT_NE(error.find("No such file"), std::string::npos) << error;
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
  // What a gateway that died leaves behind: a socket file that nobody listens on.
  auto stale = std::make_unique<SilentSocket>(socket_path_, false);
  ASSERT_TRUE(stale->ok());
  const auto start = Clock::now();
  auto waiting = connect_wait_async(socket_path_, 0);
  // The gateway is away for a while (the scenario, not a synchronisation: the worker must connect
  // whenever it comes).
  std::this_thread::sleep_for(milliseconds(200));
  stale.reset();
  DoublingHandler handler;
  auto restarted = make_unix_ingress_server(socket_path_);
  ASSERT_TRUE(restarted->start(handler).ok());

  const Connected connected = waiting.get();
  ASSERT_EQ(connected.status, GG_OK) << connected.error;
  EXPECT_GE(Clock::now() - start, milliseconds(200));
  EXPECT_TRUE(handler.wait_until([&] { return handler.connected.contains(0); }));
  EXPECT_EQ(gg_close(connected.client), GG_OK);
  restarted->stop();
}

TEST_F(IngressTest, ConnectWaitTriesAgainWhenTheGatewayClosesBeforeAnswering) {
  server_->stop();
  // A gateway that is stopping: it takes the connection and closes it without an answer.
  auto stopping = std::make_unique<SilentSocket>(socket_path_, true);
  ASSERT_TRUE(stopping->ok());
  auto waiting = connect_wait_async(socket_path_, 0);
  ASSERT_TRUE(stopping->accept_and_close());
  stopping.reset();
  DoublingHandler handler;
  auto restarted = make_unix_ingress_server(socket_path_);
  ASSERT_TRUE(restarted->start(handler).ok());

  const Connected connected = waiting.get();
  ASSERT_EQ(connected.status, GG_OK) << connected.error;
  EXPECT_EQ(gg_close(connected.client), GG_OK);
  restarted->stop();
}

TEST_F(IngressTest, AGatewayThatNeverAnswersCostsNoMoreThanTheTimeGiven) {
  const std::string silent_path = dir_.path() + "/silent.sock";
  SilentSocket silent(silent_path, true);
  ASSERT_TRUE(silent.ok());
  gg_client* client = nullptr;
  const auto start = Clock::now();
  EXPECT_EQ(gg_connect_wait(silent_path.c_str(), 0, 300, &client), GG_TIMEOUT);
  const auto took = Clock::now() - start;
  EXPECT_GE(took, milliseconds(300));
  EXPECT_LT(took, milliseconds(10000));
  EXPECT_NE(std::string(gg_last_error()).find("no reply from the gateway"), std::string::npos)
      << gg_last_error();
}

TEST_F(IngressTest, AGatewayThatDoesNotAcceptDoesNotBlockTheConnect) {
  const std::string busy_path = dir_.path() + "/busy.sock";
  SilentSocket busy(busy_path, true, 0);
  ASSERT_TRUE(busy.ok());
  // Fill the listen queue: the connections stay unaccepted.
  std::vector<int> queued;
  for (int i = 0; i < 8; ++i) {
    const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, busy_path.c_str(), sizeof address.sun_path - 1);
    const bool queued_one =
        ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
    if (!queued_one) close(fd);
    if (!queued_one) break;
    queued.push_back(fd);
  }
  ASSERT_FALSE(queued.empty());
  gg_client* client = nullptr;
  const auto start = Clock::now();
  EXPECT_EQ(gg_connect(busy_path.c_str(), 0, &client), GG_CONNECT_FAILED);
  EXPECT_LT(Clock::now() - start, milliseconds(10000));
  EXPECT_NE(std::string(gg_last_error()).find("Resource temporarily unavailable"),
            std::string::npos)
      << gg_last_error();
  for (const int fd : queued) close(fd);
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
