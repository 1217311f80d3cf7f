// Helpers for the HTTP tests: a Beast client that talks to a server on 127.0.0.1 with every
// operation bounded in time, a fixture that starts a server on a system-picked port, and the
// checks of a problem+json response.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common/http/http_server.h"
#include "common/http/problem.h"

namespace gradgate::http::testing {

namespace beast_http = boost::beast::http;
using Reply = beast_http::response<beast_http::string_body>;
using Headers = std::vector<std::pair<beast_http::field, std::string>>;
using error_code = boost::system::error_code;

/// Bounds every client operation: a server that never answers fails the test instead of hanging.
inline constexpr std::chrono::seconds kClientTimeout{10};

/// One client connection. Operations are asynchronous underneath so that the stream's timeout
/// applies, and run to completion before returning.
class TestClient {
 public:
  explicit TestClient(uint16_t port) : stream_(io_) {
    const boost::asio::ip::tcp::endpoint server(boost::asio::ip::make_address("127.0.0.1"), port);
    error_code error;
    stream_.expires_after(kClientTimeout);
    stream_.async_connect(server, [&](const error_code& result) { error = result; });
    run();
    EXPECT_FALSE(error) << "connect: " << error.message();
  }

  /// Sends a request and reads its reply; a failed exchange fails the test (and returns an
  /// empty reply).
  Reply send(verb method, std::string target, std::string body = {}, const Headers& headers = {}) {
    beast_http::request<beast_http::string_body> request(method, target, 11);
    request.set(beast_http::field::host, "127.0.0.1");
    for (const auto& [name, value] : headers) request.set(name, value);
    request.body() = std::move(body);
    request.prepare_payload();
    error_code error = write(request);
    EXPECT_FALSE(error) << "write: " << error.message();
    Reply reply;
    error = read(reply);
    EXPECT_FALSE(error) << "read: " << error.message();
    return reply;
  }

  /// Sends JSON text with Content-Type application/json.
  Reply send_json(verb method, std::string target, std::string json, Headers headers = {}) {
    headers.emplace_back(beast_http::field::content_type, "application/json");
    return send(method, std::move(target), std::move(json), headers);
  }

  error_code write_raw(std::string_view bytes) {
    error_code error;
    stream_.expires_after(kClientTimeout);
    boost::asio::async_write(stream_, boost::asio::buffer(bytes.data(), bytes.size()),
                             [&](const error_code& result, std::size_t) { error = result; });
    run();
    return error;
  }

  template <typename Message>
  error_code write(Message& message) {
    error_code error;
    stream_.expires_after(kClientTimeout);
    beast_http::async_write(stream_, message,
                            [&](const error_code& result, std::size_t) { error = result; });
    run();
    return error;
  }

  /// Reads one reply; end_of_stream when the server closed the connection instead.
  error_code read(Reply& reply) {
    error_code error;
    stream_.expires_after(kClientTimeout);
    beast_http::async_read(stream_, buffer_, reply,
                           [&](const error_code& result, std::size_t) { error = result; });
    run();
    return error;
  }

 private:
  void run() {
    io_.restart();
    io_.run();
  }

  boost::asio::io_context io_;
  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
};

/// Checks that `reply` is a problem+json response with this status and, when given, the bad
/// field (absent otherwise) and a part of its detail.
inline void expect_problem(const Reply& reply, status code, std::string_view field = {},
                           std::string_view detail_part = {}) {
  EXPECT_EQ(reply.result(), code) << reply.body();
  EXPECT_EQ(reply[beast_http::field::content_type], kProblemContentType);
  const nlohmann::json body = nlohmann::json::parse(reply.body(), nullptr, false);
  ASSERT_TRUE(body.is_object()) << reply.body();
  EXPECT_EQ(body.value("type", ""), "about:blank");
  EXPECT_EQ(body.value("status", 0), static_cast<int>(code));
  EXPECT_EQ(body.value("title", ""), beast_http::obsolete_reason(code));
  const std::string detail = body.value("detail", "");
  EXPECT_FALSE(detail.empty());
  EXPECT_NE(detail.find(detail_part), std::string::npos) << detail;
  if (field.empty()) {
    EXPECT_FALSE(body.contains("field")) << reply.body();
  } else {
    EXPECT_EQ(body.value("field", ""), field) << reply.body();
  }
}

/// Starts an HttpServer on 127.0.0.1 and a system-picked port; stops it at the end of the test.
class ServerFixture : public ::testing::Test {
 protected:
  void start_server(ServerOptions options, const std::function<void(HttpServer&)>& add_routes) {
    server_ = std::make_unique<HttpServer>(std::move(options));
    add_routes(*server_);
    const Status started = server_->start();
    ASSERT_TRUE(started.ok()) << started.to_string();
    ASSERT_NE(server_->port(), 0);
  }

  TestClient connect() const { return TestClient(server_->port()); }

  std::unique_ptr<HttpServer> server_;
};

}  // namespace gradgate::http::testing
