// The HTTP server of our REST APIs (controller and gateway admin): Boost.Beast on one I/O thread
// of its own, routing to handlers by method and path, with the limits, timeouts, bearer-token
// check and problem+json errors that every API shares (see docs/http.md).
//
//   HttpServer server({.port = 8080, .token = TokenCheck(token)});
//   server.add_route(verb::put, "/v1/policy", put_policy,
//                    {.requires_token = true, .json_body = true});
//   GRADGATE_RETURN_IF_ERROR(server.start());
//
// Built-in answers, all application/problem+json: 400 malformed request, 401/403 bearer token,
// 404 unknown path, 405 (with Allow) known path and another method, 408 request not received
// within the timeout, 413 body over the limit (refused from its Content-Length, not read),
// 415 non-JSON body on a json_body route, 431 headers over the limit, 500 handler threw,
// 503 (with Retry-After) a connection over the connection limit. Keep-alive is supported.
// Errors found while reading a request (400 malformed HTTP, 408, 413, 431) and the connection
// limit's 503 close the connection after the answer; the others leave it open.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "common/http/connection_limit.h"
#include "common/http/message.h"
#include "common/http/responder.h"
#include "common/http/router.h"
#include "common/http/token.h"
#include "gradgate/base/status.h"

namespace gradgate::http {

class AnswerGate;
class ConnectionSlots;

struct ServerOptions {
  /// A dotted-quad IPv4 address, or a host name (listens on its first IPv4 address; resolved at
  /// start, through DNS where /etc/hosts does not have it).
  std::string bind_address = "127.0.0.1";
  uint16_t port = 0;  // 0: the system picks one; HttpServer::port() tells which
  std::size_t max_body_bytes = std::size_t{1} << 20;
  uint32_t max_header_bytes = 16 * 1024;
  /// Time to receive a whole request (headers and body), counted from when the server starts
  /// waiting for it: the connection was accepted or the previous response sent. An idle
  /// connection is closed after it. Also bounds writing a response.
  std::chrono::milliseconds request_timeout = std::chrono::seconds(10);
  /// The most connections served at once: each may hold a request of up to max_body_bytes. At the
  /// limit a new connection takes the slot of the one that has waited longest for a request
  /// (closed quietly); only when all are busy with requests is it answered 503 with Retry-After,
  /// before it sends anything, and closed (connection_slots.h).
  uint32_t max_connections = 256;
  /// Routes with `requires_token` need this token; an empty one disables the check.
  TokenCheck token{};
  /// When set, called for every response sent, on the I/O thread, with the pattern of the route
  /// the request matched ("" when none: an unknown path, or a request refused before routing)
  /// and the status: for request counters. Must be quick.
  std::function<void(std::string_view route, status code)> on_response{};
};

class HttpServer {
 public:
  explicit HttpServer(ServerOptions options);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// Adds a route (see router.h for patterns). Call before start(); later calls are logged and
  /// ignored. A bad or duplicate route is reported by start(), so that a table of routes reads
  /// without error handling on each line.
  void add_route(verb method, std::string_view pattern, Handler handler, RouteOptions options = {});
  /// Adds a deferred route, which answers through a Responder (responder.h), later and from any
  /// thread; the same rules as add_route. While it has not answered, the request timeout does
  /// not apply: the handler bounds the wait.
  void add_async_route(verb method, std::string_view pattern, AsyncHandler handler,
                       RouteOptions options = {});

  /// Binds, listens and starts the I/O thread. Errors: a bad route, a bind address that is no
  /// IPv4 address or host name, or a max_connections of 0 (kInvalidArgument); a host name that
  /// does not resolve, or the address in use (kUnavailable); a second start (kInternal).
  Status start();
  /// Closes the listener and every connection and joins the I/O thread; pending Responders then
  /// do nothing. Idempotent; not from a handler (it would join its own thread).
  void stop();

  /// The bound port, once started.
  uint16_t port() const { return port_; }

 private:
  void accept();
  /// Whether routes may still be added (before start()); logs the refused `pattern` otherwise.
  bool accepts_routes(std::string_view pattern) const;
  void keep_first_error(Status added);

  const ServerOptions options_;
  Router router_;
  Status routes_status_;
  std::shared_ptr<AnswerGate> answers_;  // open while the server runs
  std::shared_ptr<ConnectionSlots> slots_;
  bool started_ = false;
  uint16_t port_ = 0;
  std::unique_ptr<boost::asio::io_context> io_;
  std::optional<boost::asio::ip::tcp::acceptor> acceptor_;
  std::optional<boost::asio::steady_timer> accept_backoff_;
  std::thread io_thread_;
};

}  // namespace gradgate::http
