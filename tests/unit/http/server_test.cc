// Routing and lifecycle of HttpServer over real HTTP: handlers, path and query parameters (and
// the declared ones), 404, 405 with Allow, HEAD, 500 from a throwing handler, keep-alive, start
// and stop.
#include <stdexcept>

#include "http_test_support.h"

namespace gradgate::http::testing {
namespace {

class ServerTest : public ServerFixture {
 protected:
  void SetUp() override {
    start_server({}, [](HttpServer& server) {
      server.add_route(verb::get, "/v1/policy", [](const Request&) {
        return json_response({{"policy", "static"}});
      });
      server.add_route(verb::put, "/v1/policy", [](const Request& request) {
        return json_response({{"stored", request.body()}}, status::accepted);
      });
      server.add_route(verb::get, "/v1/jobs/{id}", [](const Request& request) {
        return json_response({{"id", request.path_parameter("id")},
                              {"path", request.path()},
                              {"query", request.query()},
                              {"trace", request.header("x-trace")}});
      });
      server.add_route(verb::get, "/v1/jobs/summary", [](const Request&) {
        return json_response({{"summary", true}});
      });
      server.add_route(verb::get, "/v1/throws",
                       [](const Request&) -> Response { throw std::runtime_error("boom"); });
      server.add_route(verb::get, "/v1/echo", [](const Request& request) {
        Response response{.content_type = "text/plain", .body = request.query().at("n")};
        response.headers.emplace_back("X-Echo", request.query().at("n"));
        return response;
      });
      server.add_route(verb::get, "/v1/declared",
                       [](const Request& request) {
                         return json_response({{"query", request.query()}});
                       },
                       {.query = {{"job_id", "wait_ms"}}});
      server.add_route(verb::get, "/v1/none", [](const Request&) { return json_response({}); },
                       {.query = {{}}});
    });
  }
};

nlohmann::json json_of(const Reply& reply) { return nlohmann::json::parse(reply.body()); }

TEST_F(ServerTest, RoutesByMethodAndPath) {
  TestClient client = connect();
  const Reply got = client.send(verb::get, "/v1/policy");
  EXPECT_EQ(got.result(), status::ok);
  EXPECT_EQ(got[beast_http::field::content_type], "application/json");
  EXPECT_EQ(json_of(got)["policy"], "static");

  const Reply put = client.send_json(verb::put, "/v1/policy", R"({"a":1})");
  EXPECT_EQ(put.result(), status::accepted);
  EXPECT_EQ(json_of(put)["stored"], R"({"a":1})");
}

TEST_F(ServerTest, HandlerSeesDecodedPathParametersQueryAndHeaders) {
  TestClient client = connect();
  const Reply reply = client.send(verb::get, "/v1/jobs/job%201?limit=10&name=a+b%2Fc&flag");
  ASSERT_EQ(reply.result(), status::ok) << reply.body();
  const nlohmann::json body = json_of(reply);
  EXPECT_EQ(body["id"], "job 1");
  EXPECT_EQ(body["path"], "/v1/jobs/job%201");
  EXPECT_EQ(body["query"], nlohmann::json({{"limit", "10"}, {"name", "a b/c"}, {"flag", ""}}));
  EXPECT_EQ(body["trace"], "");
}

TEST_F(ServerTest, HeaderLookupIgnoresCase) {
  TestClient client = connect();
  ClientRequest request(verb::get, "/v1/jobs/7", 11);
  request.set(beast_http::field::host, "127.0.0.1");
  request.set("X-TRACE", "abc");
  ASSERT_FALSE(client.write(request));
  Reply reply;
  ASSERT_FALSE(client.read(reply));
  EXPECT_EQ(json_of(reply)["trace"], "abc");
}

TEST_F(ServerTest, LiteralPatternWinsOverParameter) {
  TestClient client = connect();
  EXPECT_EQ(json_of(client.send(verb::get, "/v1/jobs/summary"))["summary"], true);
  EXPECT_EQ(json_of(client.send(verb::get, "/v1/jobs/other"))["id"], "other");
}

TEST_F(ServerTest, UnknownPathIs404) {
  TestClient client = connect();
  expect_problem(client.send(verb::get, "/v1/nothing"), status::not_found, {}, "/v1/nothing");
  expect_problem(client.send(verb::get, "/v1/policy/"), status::not_found);
  expect_problem(client.send(verb::get, "/v1/jobs/1/2"), status::not_found);
  expect_problem(client.send(verb::get, "/"), status::not_found);
}

TEST_F(ServerTest, KnownPathWithOtherMethodIs405WithAllow) {
  TestClient client = connect();
  const Reply reply = client.send(verb::delete_, "/v1/policy");
  expect_problem(reply, status::method_not_allowed, {}, "DELETE");
  EXPECT_EQ(reply[beast_http::field::allow], "GET, PUT, HEAD");
  EXPECT_EQ(client.send(verb::get, "/v1/policy").result(), status::ok);  // connection still up
}

TEST_F(ServerTest, AQueryParameterARouteDoesNotTakeIs400NamingIt) {
  TestClient client = connect();
  const Reply taken = client.send(verb::get, "/v1/declared?job_id=3&wait_ms=10");
  ASSERT_EQ(taken.result(), status::ok) << taken.body();
  EXPECT_EQ(json_of(taken)["query"], nlohmann::json({{"job_id", "3"}, {"wait_ms", "10"}}));
  expect_problem(client.send(verb::get, "/v1/declared?job_id=3&jobid=4"), status::bad_request,
                 "jobid", "jobid: unknown query parameter; this path takes job_id, wait_ms");
  expect_problem(client.send(verb::get, "/v1/none?x=1"), status::bad_request, "x",
                 "this path takes none");
  EXPECT_EQ(client.send(verb::get, "/v1/none").result(), status::ok);
  // A route that declares nothing is not checked.
  EXPECT_EQ(client.send(verb::get, "/v1/policy?anything=1").result(), status::ok);
}

TEST_F(ServerTest, HeadIsGetWithoutTheBodyAndTheConnectionGoesOn) {
  TestClient client = connect();
  const Reply get = client.send(verb::get, "/v1/policy");
  ASSERT_EQ(get.result(), status::ok);
  ASSERT_FALSE(get.body().empty());
  const Reply head = client.send(verb::head, "/v1/policy");
  EXPECT_EQ(head.result(), status::ok);
  EXPECT_EQ(head[beast_http::field::content_length], std::to_string(get.body().size()));
  EXPECT_EQ(head[beast_http::field::content_type], get[beast_http::field::content_type]);
  EXPECT_TRUE(head.body().empty());
  // No stray content before the next answer: the connection reads the next reply whole.
  const Reply again = client.send(verb::get, "/v1/policy");
  EXPECT_EQ(again.result(), status::ok);
  EXPECT_EQ(again.body(), get.body());
  // An unknown path is unknown to HEAD as well: the status alone.
  const Reply unknown = client.send(verb::head, "/v1/nothing");
  EXPECT_EQ(unknown.result(), status::not_found);
  EXPECT_TRUE(unknown.body().empty());
}

TEST_F(ServerTest, MalformedPercentEncodingIs400) {
  TestClient client = connect();
  expect_problem(client.send(verb::get, "/v1/jobs/a%zz"), status::bad_request, {}, "a%zz");
  expect_problem(client.send(verb::get, "/v1/jobs/a?x=%4"), status::bad_request, {}, "x=%4");
}

TEST_F(ServerTest, ThrowingHandlerIs500AndServerStaysUp) {
  TestClient client = connect();
  expect_problem(client.send(verb::get, "/v1/throws"), status::internal_server_error);
  EXPECT_EQ(client.send(verb::get, "/v1/policy").result(), status::ok);
  EXPECT_EQ(connect().send(verb::get, "/v1/policy").result(), status::ok);
}

TEST_F(ServerTest, ManyRequestsOnOneKeepAliveConnection) {
  TestClient client = connect();
  for (int i = 0; i < 200; ++i) {
    const Reply reply = client.send(verb::get, "/v1/echo?n=" + std::to_string(i));
    ASSERT_EQ(reply.result(), status::ok);
    ASSERT_TRUE(reply.keep_alive());
    ASSERT_EQ(reply.body(), std::to_string(i));
    ASSERT_EQ(reply["X-Echo"], std::to_string(i));
    ASSERT_EQ(reply[beast_http::field::content_type], "text/plain");
  }
}

TEST_F(ServerTest, ConnectionCloseIsHonoured) {
  TestClient client = connect();
  const Reply reply =
      client.send(verb::get, "/v1/policy", {}, {{beast_http::field::connection, "close"}});
  EXPECT_EQ(reply.result(), status::ok);
  EXPECT_FALSE(reply.keep_alive());
  Reply none;
  EXPECT_EQ(client.read(none), beast_http::error::end_of_stream);
}

TEST_F(ServerTest, ServesSeveralConnectionsAtOnce) {
  TestClient first = connect();
  TestClient second = connect();
  EXPECT_EQ(second.send(verb::get, "/v1/policy").result(), status::ok);
  EXPECT_EQ(first.send(verb::get, "/v1/policy").result(), status::ok);
}

TEST(HttpServerLifecycle, BadRoutesFailStart) {
  const Response unused;
  auto handler = [&](const Request&) { return unused; };
  for (const char* pattern : {"v1/x", "/v1//x", "/v1/{a}/{a}", "/v1/x{y}", "/v1/{}"}) {
    HttpServer server({});
    server.add_route(verb::get, pattern, handler);
    const Status started = server.start();
    EXPECT_EQ(started.code(), ErrorCode::kInvalidArgument) << pattern;
    EXPECT_NE(started.message().find(pattern), std::string::npos) << started.message();
  }
  HttpServer duplicate({});
  duplicate.add_route(verb::get, "/v1/jobs/{id}", handler);
  duplicate.add_route(verb::get, "/v1/jobs/{id}", handler);
  EXPECT_EQ(duplicate.start().code(), ErrorCode::kInvalidArgument);
  HttpServer renamed({});
  renamed.add_route(verb::get, "/v1/jobs/{id}", handler);
  renamed.add_route(verb::put, "/v1/jobs/{name}", handler);
  EXPECT_EQ(renamed.start().code(), ErrorCode::kInvalidArgument);
}

TEST(HttpServerLifecycle, PortInUseAndBadAddressFailStart) {
  HttpServer first({});
  ASSERT_TRUE(first.start().ok());
  HttpServer second({.port = first.port()});
  const Status taken = second.start();
  EXPECT_EQ(taken.code(), ErrorCode::kUnavailable);
  EXPECT_NE(taken.message().find(std::to_string(first.port())), std::string::npos);
  // Refused before any lookup: text no host name holds, and shorthand addresses ("0" would
  // listen on every interface).
  for (const char* bad : {"not an address", "0", "127.1", "127.0.0.256", "0x0", "::1", "-a"}) {
    HttpServer bad_address({.bind_address = bad});
    const Status refused = bad_address.start();
    EXPECT_EQ(refused.code(), ErrorCode::kInvalidArgument) << bad;
    EXPECT_NE(refused.message().find(bad), std::string::npos) << refused.message();
    EXPECT_NE(refused.message().find("is not an IPv4 address or host name"), std::string::npos)
        << refused.message();
  }
}

TEST(HttpServerLifecycle, AHostNameListensOnItsIpv4Address) {
  // localhost comes from /etc/hosts: no DNS is asked.
  HttpServer server({.bind_address = "localhost"});
  server.add_route(verb::get, "/livez", [](const Request&) { return json_response({}); });
  const Status started = server.start();
  ASSERT_TRUE(started.ok()) << started.to_string();
  EXPECT_EQ(TestClient(server.port()).send(verb::get, "/livez").result(), status::ok);
}

TEST(HttpServerLifecycle, StopIsIdempotentAndClosesTheListener) {
  HttpServer server({});
  ASSERT_TRUE(server.start().ok());
  EXPECT_EQ(server.start().code(), ErrorCode::kInternal);
  const uint16_t port = server.port();
  server.stop();
  server.stop();
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket socket(io);
  error_code error;
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), port}, error);
  EXPECT_EQ(error, boost::asio::error::connection_refused);
}

TEST(HttpServerLifecycle, StopWithOpenConnections) {
  HttpServer server({});
  server.add_route(verb::get, "/", [](const Request&) { return json_response({}); });
  ASSERT_TRUE(server.start().ok());
  TestClient idle(server.port());
  TestClient busy(server.port());
  EXPECT_EQ(busy.send(verb::get, "/").result(), status::ok);
  server.stop();
  Reply none;
  EXPECT_TRUE(busy.read(none));  // closed by the server, not left hanging
}

}  // namespace
}  // namespace gradgate::http::testing
