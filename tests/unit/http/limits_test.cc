// The server's limits over real HTTP: oversized bodies and headers, malformed requests, slow and
// idle clients. After each refusal the server must go on serving.
#include <chrono>

#include "http_test_support.h"

namespace gradgate::http::testing {
namespace {

constexpr std::size_t kMaxBody = 1024;
constexpr std::chrono::milliseconds kTimeout{300};

class LimitsTest : public ServerFixture {
 protected:
  void SetUp() override {
    start_server(
        {.max_body_bytes = kMaxBody, .max_header_bytes = 2048, .request_timeout = kTimeout},
        [](HttpServer& server) {
          server.add_route(verb::put, "/v1/policy", [](const Request& request) {
            return json_response({{"bytes", request.body().size()}});
          });
          server.add_route(verb::get, "/livez", [](const Request&) {
            return json_response({{"status", "ok"}});
          });
        });
  }

  void expect_still_serving() {
    EXPECT_EQ(connect().send(verb::get, "/livez").result(), status::ok);
  }
};

TEST_F(LimitsTest, BodyAtTheLimitIsServed) {
  TestClient client = connect();
  const Reply reply = client.send(verb::put, "/v1/policy", std::string(kMaxBody, 'x'));
  EXPECT_EQ(reply.result(), status::ok);
  EXPECT_EQ(reply.body(), R"({"bytes":1024})");
}

TEST_F(LimitsTest, BodyOverTheLimitIs413AndTheConnectionCloses) {
  TestClient client = connect();
  const Reply reply = client.send(verb::put, "/v1/policy", std::string(kMaxBody + 1, 'x'));
  expect_problem(reply, status::payload_too_large, {}, "1024 bytes");
  EXPECT_FALSE(reply.keep_alive());
  Reply none;
  EXPECT_EQ(client.read(none), beast_http::error::end_of_stream);
  expect_still_serving();
}

TEST_F(LimitsTest, HugeBodyIsRefusedFromItsLengthAndTheReplyArrives) {
  // Megabytes beyond what the server reads: the refusal must not be lost to a connection reset.
  TestClient client = connect();
  const Reply reply = client.send(verb::put, "/v1/policy", std::string(8 << 20, 'x'));
  expect_problem(reply, status::payload_too_large);
  expect_still_serving();
}

TEST_F(LimitsTest, ChunkedBodyOverTheLimitIs413) {
  TestClient client = connect();
  ASSERT_FALSE(
      client.write_raw("PUT /v1/policy HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "800\r\n" +
                       std::string(0x800, 'x') + "\r\n0\r\n\r\n"));
  Reply reply;
  ASSERT_FALSE(client.read(reply));
  expect_problem(reply, status::payload_too_large);
  expect_still_serving();
}

TEST_F(LimitsTest, AClientThatGoesOnSendingAfterA413IsClosedAtTheTimeout) {
  // The refused body keeps coming without a pause: the server reads it for the request timeout
  // only (300 ms), then closes, and the client's writes fail.
  TestClient client = connect();
  ASSERT_FALSE(client.write_raw(
      "PUT /v1/policy HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000000\r\n\r\n"));
  const std::string chunk(64 * 1024, 'x');
  const auto start = std::chrono::steady_clock::now();
  const auto bound = start + std::chrono::seconds(20);
  error_code error;
  for (int i = 0; i < 1000000 && !error && std::chrono::steady_clock::now() < bound; ++i) {
    error = client.write_raw(chunk);
  }
  EXPECT_TRUE(error) << "the server never closed the connection";
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  expect_still_serving();
}

TEST_F(LimitsTest, HeadersOverTheLimitAre431) {
  TestClient client = connect();
  const Reply reply =
      client.send(verb::get, "/livez", {}, {{beast_http::field::cookie, std::string(4096, 'c')}});
  expect_problem(reply, status::request_header_fields_too_large, {}, "2048 bytes");
  expect_still_serving();
}

TEST_F(LimitsTest, MalformedRequestIs400) {
  TestClient client = connect();
  ASSERT_FALSE(client.write_raw("NOT AN HTTP REQUEST\r\n\r\n"));
  Reply reply;
  ASSERT_FALSE(client.read(reply));
  expect_problem(reply, status::bad_request, {}, "malformed HTTP request");
  EXPECT_FALSE(reply.keep_alive());
  expect_still_serving();
}

TEST_F(LimitsTest, BadContentLengthIs400) {
  TestClient client = connect();
  ASSERT_FALSE(
      client.write_raw("PUT /v1/policy HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n"));
  Reply reply;
  ASSERT_FALSE(client.read(reply));
  expect_problem(reply, status::bad_request);
  expect_still_serving();
}

TEST_F(LimitsTest, SlowRequestGets408ThenTheConnectionCloses) {
  // The server's clock starts when it accepts, which may be before connect() returns here.
  const auto began = std::chrono::steady_clock::now();
  TestClient client = connect();
  ASSERT_FALSE(
      client.write_raw("PUT /v1/policy HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12"));
  Reply reply;
  ASSERT_FALSE(client.read(reply));
  EXPECT_GE(std::chrono::steady_clock::now() - began, kTimeout);
  expect_problem(reply, status::request_timeout, {}, "300 ms");
  EXPECT_FALSE(reply.keep_alive());
  Reply none;
  EXPECT_EQ(client.read(none), beast_http::error::end_of_stream);
  expect_still_serving();
}

TEST_F(LimitsTest, HalfSentHeadersGet408) {
  TestClient client = connect();
  ASSERT_FALSE(client.write_raw("GET /livez HTTP/1.1\r\nHost: x\r\n"));
  Reply reply;
  ASSERT_FALSE(client.read(reply));
  expect_problem(reply, status::request_timeout);
  expect_still_serving();
}

TEST_F(LimitsTest, IdleKeepAliveConnectionIsClosedQuietly) {
  TestClient client = connect();
  EXPECT_EQ(client.send(verb::get, "/livez").result(), status::ok);
  Reply none;  // nothing more is sent: the server closes without a 408
  EXPECT_EQ(client.read(none), beast_http::error::end_of_stream);
  expect_still_serving();
}

}  // namespace
}  // namespace gradgate::http::testing
