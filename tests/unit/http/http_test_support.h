// Helpers for the HTTP tests: a Beast client that talks to a server on 127.0.0.1 with every
// operation bounded in time, a fixture that starts a server on a system-picked port, and the
// checks of a problem+json response.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/http/http_server.h"
#include "common/http/problem.h"

namespace gradgate::http::testing {

namespace beast_http = boost::beast::http;
using Reply = beast_http::response<beast_http::string_body>;
using ClientRequest = beast_http::request<beast_http::string_body>;
using Headers = std::vector<std::pair<beast_http::field, std::string>>;
using error_code = boost::system::error_code;

/// Bounds every client operation: a server that never answers fails the test instead of hanging.
inline constexpr std::chrono::seconds kClientTimeout{10};

/// One client connection. Operations are asynchronous underneath so that the stream's timeout
/// applies, and run to completion before returning. (Defined in http_test_support.cc: Beast's
/// composed operations are compiled once, not in every test file.)
class TestClient {
 public:
  explicit TestClient(uint16_t port);

  /// Sends a request and reads its reply; a failed exchange fails the test (and returns an
  /// empty reply).
  Reply send(verb method, std::string target, std::string body = {}, const Headers& headers = {});
  /// Sends JSON text with Content-Type application/json.
  Reply send_json(verb method, std::string target, std::string json, Headers headers = {});
  error_code write_raw(std::string_view bytes);
  error_code write(ClientRequest& request);
  /// Reads one reply (its header alone when `header_only`: the answer to HEAD); end_of_stream
  /// when the server closed the connection instead.
  error_code read(Reply& reply, bool header_only = false);

 private:
  /// Starts one asynchronous operation with `start(handler)` under the client timeout and runs
  /// it to completion; its error.
  template <typename Start>
  error_code bounded(Start start);
  void run();

  boost::asio::io_context io_;
  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
};

/// Checks that `reply` is a problem+json response with this status and, when given, the bad
/// field (absent otherwise) and a part of its detail.
void expect_problem(const Reply& reply, status code, std::string_view field = {},
                    std::string_view detail_part = {});

/// A GET of `target` as TestClient::write sends it (HTTP/1.1, a Host header).
inline ClientRequest get_request(std::string target) {
  ClientRequest request(verb::get, std::move(target), 11);
  request.set(beast_http::field::host, "127.0.0.1");
  return request;
}

/// Whether a read that expected a reply found the connection closed instead.
inline bool closed_without_answer(const error_code& read) {
  return read == beast_http::error::end_of_stream || read == boost::asio::error::connection_reset;
}

/// Hands the Responders of a deferred route to the test thread, in the order of the requests
/// (at most four).
class Responders {
 public:
  void add(Responder responder) {
    std::lock_guard lock(mutex_);
    promises_[added_++].set_value(std::move(responder));
  }
  /// The responder of the `index`th request, once its handler ran (bounded wait).
  std::optional<Responder> get(std::size_t index) {
    std::future<Responder> future;
    {
      std::lock_guard lock(mutex_);
      future = promises_[index].get_future();
    }
    if (future.wait_for(kClientTimeout) != std::future_status::ready) return std::nullopt;
    return future.get();
  }

 private:
  std::mutex mutex_;
  std::size_t added_ = 0;
  std::promise<Responder> promises_[4];
};

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
