// Deferred routes (add_async_route) over real HTTP: a Responder answers later from another
// thread; only its first call counts; a client that leaves or a server that stops makes it a
// no-op; the usual checks (token, 500 on a throw) still apply.
#include <future>
#include <stdexcept>

#include "http_test_support.h"

namespace gradgate::http::testing {
namespace {

class AsyncRouteTest : public ServerFixture {
 protected:
  void SetUp() override {
    start_server({.token = TokenCheck("token")}, [this](HttpServer& server) {
      server.add_async_route(verb::get, "/v1/wait", [this](const Request&, Responder respond) {
        responders_.add(std::move(respond));
      });
      server.add_async_route(verb::put, "/v1/wait",
                             [](const Request& request, Responder respond) {
                               respond(json_response({{"echo", request.body()}}));
                             },
                             {.requires_token = true, .json_body = true});
      server.add_async_route(verb::get, "/v1/throws",
                             [](const Request&, Responder) { throw std::runtime_error("boom"); });
      server.add_route(verb::get, "/v1/now", [](const Request&) {
        return json_response({{"now", true}});
      });
    });
  }

  // Sends GET /v1/wait on a connection of its own thread and returns its reply.
  std::future<Reply> wait_in_background() {
    return std::async(std::launch::async, [port = server_->port()] {
      TestClient client(port);
      return client.send(verb::get, "/v1/wait");
    });
  }

  Responders responders_;
};

TEST_F(AsyncRouteTest, AnswersLaterFromAnotherThread) {
  std::future<Reply> reply = wait_in_background();
  std::optional<Responder> respond = responders_.get(0);
  ASSERT_TRUE(respond.has_value());
  // The I/O thread is free meanwhile: another connection is served.
  TestClient other = connect();
  EXPECT_EQ(other.send(verb::get, "/v1/now").result(), status::ok);

  (*respond)(json_response({{"answer", 42}}, status::accepted));
  ASSERT_EQ(reply.wait_for(kClientTimeout), std::future_status::ready);
  const Reply got = reply.get();
  EXPECT_EQ(got.result(), status::accepted);
  EXPECT_EQ(nlohmann::json::parse(got.body())["answer"], 42);
}

TEST_F(AsyncRouteTest, OnlyTheFirstAnswerIsSentAndTheConnectionGoesOn) {
  TestClient client = connect();
  auto sent = std::async(std::launch::async, [this] {
    std::optional<Responder> respond = responders_.get(0);
    if (!respond) return;
    (*respond)(json_response({{"n", 1}}));
    (*respond)(json_response({{"n", 2}}));
  });
  const Reply first = client.send(verb::get, "/v1/wait");
  sent.get();
  EXPECT_EQ(nlohmann::json::parse(first.body())["n"], 1);
  const Reply next = client.send(verb::get, "/v1/now");  // keep-alive: the next request
  EXPECT_EQ(next.result(), status::ok);
  EXPECT_EQ(nlohmann::json::parse(next.body())["now"], true);
}

TEST_F(AsyncRouteTest, AnswerAfterTheClientLeftIsANoOp) {
  std::optional<Responder> respond;
  {
    TestClient client = connect();
    ASSERT_FALSE(client.write_raw("GET /v1/wait HTTP/1.1\r\nHost: x\r\n\r\n"));
    respond = responders_.get(0);
    ASSERT_TRUE(respond.has_value());
  }  // the client closes its connection before the answer
  (*respond)(json_response({{"late", true}}));
  TestClient client = connect();
  EXPECT_EQ(client.send(verb::get, "/v1/now").result(), status::ok);
}

TEST_F(AsyncRouteTest, StopWithAPendingResponderDropsItSafely) {
  std::future<Reply> reply = std::async(std::launch::async, [port = server_->port()] {
    TestClient client(port);
    Reply answer;
    client.write_raw("GET /v1/wait HTTP/1.1\r\nHost: x\r\n\r\n");
    const error_code closed = client.read(answer);
    EXPECT_TRUE(closed) << "the server closes without answering";
    return answer;
  });
  std::optional<Responder> respond = responders_.get(0);
  ASSERT_TRUE(respond.has_value());
  server_->stop();
  (*respond)(json_response({{"after", "stop"}}));  // does nothing
  ASSERT_EQ(reply.wait_for(kClientTimeout), std::future_status::ready);
  reply.get();
}

TEST_F(AsyncRouteTest, TokenAndContentTypeAreCheckedBeforeTheHandler) {
  TestClient client = connect();
  expect_problem(client.send_json(verb::put, "/v1/wait", "{}"), status::unauthorized,
                 "Authorization");
  const Headers token = {{beast_http::field::authorization, "Bearer token"}};
  const Reply echoed = client.send_json(verb::put, "/v1/wait", R"({"a":1})", token);
  EXPECT_EQ(echoed.result(), status::ok);
  EXPECT_EQ(nlohmann::json::parse(echoed.body())["echo"], R"({"a":1})");
}

TEST_F(AsyncRouteTest, HandlerThatThrowsAnswers500) {
  TestClient client = connect();
  expect_problem(client.send(verb::get, "/v1/throws"), status::internal_server_error);
  EXPECT_EQ(client.send(verb::get, "/v1/now").result(), status::ok);
}

}  // namespace
}  // namespace gradgate::http::testing
