// ServerOptions::max_connections over real HTTP: at the limit a new connection takes the slot of
// the one that has waited longest for a request, which is closed; only when every connection is
// busy with a request is the new one answered 503 (with Retry-After) and closed, and refused
// connections beyond the limit are closed without an answer.
#include <chrono>
#include <future>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "http_test_support.h"

namespace gradgate::http::testing {
namespace {

constexpr uint32_t kLimit = 2;

class ConnectionLimitTest : public ServerFixture {
 protected:
  void SetUp() override {
    ServerOptions options{.request_timeout = std::chrono::seconds(30), .max_connections = kLimit};
    options.on_response = [this](std::string_view route, status code) {
      std::lock_guard lock(mutex_);
      responses_.emplace_back(std::string(route), code);
    };
    start_server(std::move(options), [this](HttpServer& server) {
      server.add_route(verb::get, "/livez", [](const Request&) {
        return json_response({{"status", "ok"}});
      });
      // Keeps its connection busy until the test answers.
      server.add_async_route(verb::get, "/v1/hold", [this](const Request&, Responder respond) {
        held_.add(std::move(respond));
      });
      // Keeps the server's I/O thread busy until the test lets it go (bounded).
      server.add_route(verb::get, "/v1/block", [this](const Request&) {
        entered_.set_value();
        (void)released_.wait_for(kClientTimeout);
        return json_response({});
      });
    });
  }

  // Occupies every slot with a request the server works on: the clients and, once every handler
  // ran, the Responders that answer them.
  std::vector<Responder> hold_every_slot(std::list<TestClient>& clients) {
    std::vector<Responder> responders;
    for (uint32_t i = 0; i < kLimit; ++i) {
      clients.emplace_back(server_->port());
      ClientRequest request = get_request("/v1/hold");
      EXPECT_FALSE(clients.back().write(request));
    }
    for (uint32_t i = 0; i < kLimit; ++i) {
      if (auto responder = held_.get(i)) responders.push_back(*std::move(responder));
    }
    return responders;
  }

  std::vector<std::pair<std::string, status>> responses() {
    std::lock_guard lock(mutex_);
    return responses_;
  }

  Responders held_;
  std::promise<void> entered_;
  std::promise<void> release_;
  std::shared_future<void> released_ = release_.get_future().share();
  std::mutex mutex_;
  std::vector<std::pair<std::string, status>> responses_;
};

// Connects until `accepted` holds for the reply to GET /livez, every 10 ms for up to 10 s (well
// below the request timeout): the server frees places as it notices clients leave, which a
// client cannot observe.
template <typename Accepted>
bool eventually(uint16_t port, Accepted accepted) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int attempt = 0; attempt < 1000 && std::chrono::steady_clock::now() < deadline; ++attempt) {
    TestClient client(port);
    ClientRequest request = get_request("/livez");
    Reply reply;
    if (!client.write(request) && !client.read(reply) && accepted(reply)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// A new connection is served; `evicted`, whose slot it took, is closed without an answer, and
// `kept` goes on being served.
void expect_served_in_place_of(TestClient& evicted, TestClient& kept, uint16_t port) {
  EXPECT_EQ(TestClient(port).send(verb::get, "/livez").result(), status::ok);
  Reply none;
  EXPECT_TRUE(closed_without_answer(evicted.read(none)));
  EXPECT_EQ(kept.send(verb::get, "/livez").result(), status::ok);
}

TEST_F(ConnectionLimitTest, ANewConnectionTakesTheSlotOfTheLongestIdle) {
  TestClient oldest = connect();
  TestClient newer = connect();
  ASSERT_EQ(oldest.send(verb::get, "/livez").result(), status::ok);
  ASSERT_EQ(newer.send(verb::get, "/livez").result(), status::ok);

  // Both wait for their next request; the third connection is served in the oldest one's slot.
  expect_served_in_place_of(oldest, newer, server_->port());
}

// A client that sends part of a request and stalls holds nothing: it gives way like an idle one
// (the oldest first), so that such clients cannot lock others out.
TEST_F(ConnectionLimitTest, AStalledPartialRequestGivesWay) {
  TestClient stalled = connect();
  ASSERT_FALSE(stalled.write_raw("GET /livez HTTP/1.1\r\nHo"));
  TestClient idle = connect();
  ASSERT_EQ(idle.send(verb::get, "/livez").result(), status::ok);

  expect_served_in_place_of(stalled, idle, server_->port());
}

// A connection whose next request has arrived but is not read yet (the I/O thread was busy)
// keeps its slot: the request is answered, and the new connection is served or refused.
TEST_F(ConnectionLimitTest, ARequestThatArrivedIsAnsweredNotEvicted) {
  TestClient idle = connect();
  ASSERT_EQ(idle.send(verb::get, "/livez").result(), status::ok);
  auto blocking = std::async(std::launch::async, [port = server_->port()] {
    return TestClient(port).send(verb::get, "/v1/block").result();
  });
  ASSERT_EQ(entered_.get_future().wait_for(kClientTimeout), std::future_status::ready);

  TestClient newcomer = connect();  // waits in the server's accept queue
  ClientRequest first = get_request("/livez");
  ASSERT_FALSE(newcomer.write(first));
  ClientRequest next = get_request("/livez");
  ASSERT_FALSE(idle.write(next));  // arrives while the I/O thread is held
  release_.set_value();

  Reply answer;
  ASSERT_FALSE(idle.read(answer)) << "the request that had arrived was dropped";
  EXPECT_EQ(answer.result(), status::ok);
  Reply other;
  ASSERT_FALSE(newcomer.read(other));
  EXPECT_TRUE(other.result() == status::ok || other.result() == status::service_unavailable)
      << other.result();
  EXPECT_EQ(blocking.get(), status::ok);
}

TEST_F(ConnectionLimitTest, WhenEveryConnectionIsBusyANewOneGets503AndIsClosed) {
  std::list<TestClient> busy;
  std::vector<Responder> responders = hold_every_slot(busy);
  ASSERT_EQ(responders.size(), kLimit);

  TestClient refused = connect();
  const Reply reply = refused.send(verb::get, "/livez");
  expect_problem(reply, status::service_unavailable, {}, "2 connections are all busy");
  EXPECT_EQ(reply[beast_http::field::retry_after], "1");
  EXPECT_FALSE(reply.keep_alive());
  Reply none;
  EXPECT_EQ(refused.read(none), beast_http::error::end_of_stream);

  // The busy connections are answered as usual.
  auto client = busy.begin();
  for (uint32_t i = 0; i < kLimit; ++i, ++client) {
    responders[i](json_response({{"held", i}}));
    Reply answer;
    ASSERT_FALSE(client->read(answer));
    EXPECT_EQ(answer.result(), status::ok);
  }
  EXPECT_EQ(responses().front(), std::make_pair(std::string(), status::service_unavailable))
      << "counted as a response of no route";
}

TEST_F(ConnectionLimitTest, RefusedConnectionsAreBoundedAndLeaveWithinASecond) {
  std::list<TestClient> busy;
  ASSERT_EQ(hold_every_slot(busy).size(), kLimit);
  std::list<TestClient> refused;  // they read their 503 and stay
  for (uint32_t i = 0; i < kLimit; ++i) {
    refused.emplace_back(server_->port());
    Reply reply;
    ASSERT_FALSE(refused.back().read(reply));
    ASSERT_EQ(reply.result(), status::service_unavailable);
  }
  const auto refused_at = std::chrono::steady_clock::now();
  TestClient beyond = connect();
  Reply none;
  EXPECT_TRUE(closed_without_answer(beyond.read(none)))
      << "no 503 beyond " << kLimit << " refused connections";

  // The server closes the refused ones after a second, not after the 30 s request timeout.
  EXPECT_TRUE(eventually(server_->port(), [](const Reply& reply) {
    return reply.result() == status::service_unavailable;
  }));
  EXPECT_LT(std::chrono::steady_clock::now() - refused_at, std::chrono::seconds(3));
}

TEST_F(ConnectionLimitTest, AClientThatLeavesDuringItsRequestGivesItsSlotBack) {
  std::list<TestClient> busy;
  ASSERT_EQ(hold_every_slot(busy).size(), kLimit);
  busy.pop_front();  // closed while its request is held: the server notices and drops it
  EXPECT_TRUE(
      eventually(server_->port(), [](const Reply& reply) { return reply.result() == status::ok; }));
}

TEST(ConnectionLimit, ZeroConnectionsIsRefusedAtStart) {
  HttpServer server({.max_connections = 0});
  const Status started = server.start();
  EXPECT_EQ(started.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(started.message().find("max_connections"), std::string::npos) << started.message();
}

}  // namespace
}  // namespace gradgate::http::testing
