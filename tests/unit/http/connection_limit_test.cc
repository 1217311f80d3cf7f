// ServerOptions::max_connections over real HTTP: connections beyond the limit are answered 503
// with Retry-After and closed, those within it are served as before, and a connection that
// closes gives its slot to the next.
#include <chrono>
#include <mutex>
#include <optional>
#include <vector>

#include "http_test_support.h"

namespace gradgate::http::testing {
namespace {

constexpr uint32_t kLimit = 2;

class ConnectionLimitTest : public ServerFixture {
 protected:
  void SetUp() override {
    ServerOptions options{.max_connections = kLimit};
    options.on_response = [this](std::string_view, status code) {
      std::lock_guard lock(mutex_);
      codes_.push_back(code);
    };
    start_server(std::move(options), [](HttpServer& server) {
      server.add_route(verb::get, "/livez", [](const Request&) {
        return json_response({{"status", "ok"}});
      });
    });
  }

  std::vector<status> codes() {
    std::lock_guard lock(mutex_);
    return codes_;
  }

  std::mutex mutex_;
  std::vector<status> codes_;
};

TEST_F(ConnectionLimitTest, ConnectionsOverTheLimitGet503AndAreClosed) {
  TestClient first = connect();
  TestClient second = connect();
  ASSERT_EQ(first.send(verb::get, "/livez").result(), status::ok);
  ASSERT_EQ(second.send(verb::get, "/livez").result(), status::ok);

  TestClient third = connect();
  const Reply refused = third.send(verb::get, "/livez");
  expect_problem(refused, status::service_unavailable, {}, "limit of 2 connections");
  EXPECT_EQ(refused[beast_http::field::retry_after], "1");
  EXPECT_FALSE(refused.keep_alive());
  Reply none;
  EXPECT_EQ(third.read(none), beast_http::error::end_of_stream);

  // The connections within the limit go on being served.
  EXPECT_EQ(first.send(verb::get, "/livez").result(), status::ok);
  EXPECT_EQ(second.send(verb::get, "/livez").result(), status::ok);
  const std::vector<status> expected = {status::ok, status::ok, status::service_unavailable,
                                        status::ok, status::ok};
  EXPECT_EQ(codes(), expected);
}

TEST_F(ConnectionLimitTest, AClosedConnectionGivesItsSlotToTheNext) {
  TestClient held = connect();
  ASSERT_EQ(held.send(verb::get, "/livez").result(), status::ok);
  {
    TestClient leaving = connect();
    ASSERT_EQ(leaving.send(verb::get, "/livez").result(), status::ok);
  }  // closed here; the server notices when it reads the end of the stream
  // Until it has, a new connection may still be refused: ask again, a bounded number of times.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::optional<status> last;
  for (int attempt = 0; attempt < 20000 && std::chrono::steady_clock::now() < deadline; ++attempt) {
    last = connect().send(verb::get, "/livez").result();
    if (*last != status::service_unavailable) break;
  }
  EXPECT_EQ(last, status::ok);
  EXPECT_EQ(held.send(verb::get, "/livez").result(), status::ok);
}

TEST(ConnectionLimit, ZeroConnectionsIsRefusedAtStart) {
  HttpServer server({.max_connections = 0});
  const Status started = server.start();
  EXPECT_EQ(started.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(started.message().find("max_connections"), std::string::npos) << started.message();
}

}  // namespace
}  // namespace gradgate::http::testing
