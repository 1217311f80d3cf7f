#include "common/http/http_server.h"

#include <spdlog/spdlog.h>
#include <boost/asio/strand.hpp>
#include <system_error>

#include "common/http/connection.h"
#include "common/net/listener.h"

namespace gradgate::http {
namespace {

namespace net = boost::asio;
using error_code = boost::system::error_code;

// How long to wait before accepting again after an accept failed (say, out of descriptors), so
// that a lasting failure does not spin the I/O thread.
constexpr std::chrono::milliseconds kAcceptBackoff{100};

}  // namespace

HttpServer::HttpServer(ServerOptions options) : options_(std::move(options)) {}

HttpServer::~HttpServer() { stop(); }

bool HttpServer::accepts_routes(std::string_view pattern) const {
  if (started_) spdlog::error("HTTP: route {} added after start() is ignored", pattern);
  return !started_;
}

void HttpServer::keep_first_error(Status added) {
  if (routes_status_.ok()) routes_status_ = std::move(added);
}

void HttpServer::add_route(verb method, std::string_view pattern, Handler handler,
                           RouteOptions options) {
  if (accepts_routes(pattern)) {
    keep_first_error(router_.add(method, pattern, std::move(handler), options));
  }
}

void HttpServer::add_async_route(verb method, std::string_view pattern, AsyncHandler handler,
                                 RouteOptions options) {
  if (accepts_routes(pattern)) {
    keep_first_error(router_.add_async(method, pattern, std::move(handler), options));
  }
}

Status HttpServer::start() {
  if (started_) return Status(ErrorCode::kInternal, "the HTTP server is started already");
  GRADGATE_RETURN_IF_ERROR(routes_status_);
  if (options_.max_connections == 0) {
    return Status(ErrorCode::kInvalidArgument, "max_connections must be at least 1");
  }
  io_ = std::make_unique<net::io_context>(1);
  auto fail = [&](Status error) {
    acceptor_.reset();
    accept_backoff_.reset();
    io_.reset();
    return error;
  };
  auto listening = gradgate::net::listen_tcp(*io_, options_.bind_address, options_.port);
  if (!listening.ok()) return fail(listening.status());
  acceptor_.emplace(std::move(listening).value());
  error_code error;
  port_ = acceptor_->local_endpoint(error).port();
  if (error) {
    return fail(Status(ErrorCode::kUnavailable, "cannot read the port of " + options_.bind_address +
                                                    ": " + error.message()));
  }
  answers_ = std::make_shared<AnswerGate>();
  slots_ = std::make_shared<ConnectionSlots>(options_.max_connections);
  accept_backoff_.emplace(*io_);

  accept();
  try {
    io_thread_ = std::thread([this] { io_->run(); });
  } catch (const std::system_error& thread_error) {
    return fail(
        Status(ErrorCode::kUnavailable,
               std::string("cannot start the HTTP server's I/O thread: ") + thread_error.what()));
  }
  started_ = true;
  return Status::ok_status();
}

void HttpServer::accept() {
  acceptor_->async_accept(
      net::make_strand(*io_), [this](const error_code& error, net::ip::tcp::socket socket) {
        if (error == net::error::operation_aborted) return;
        if (!error) {
          serve_connection(std::move(socket), options_, router_, answers_, slots_);
          return accept();
        }
        spdlog::warn("HTTP: accept on port {} failed: {}", port_, error.message());
        accept_backoff_->expires_after(kAcceptBackoff);
        accept_backoff_->async_wait([this](const error_code& wait_error) {
          if (!wait_error) accept();
        });
      });
}

void HttpServer::stop() {
  if (!io_) return;
  answers_->close();
  io_->stop();
  if (io_thread_.joinable()) io_thread_.join();
  acceptor_.reset();
  accept_backoff_.reset();
  io_.reset();  // destroys the pending operations and with them every connection
}

}  // namespace gradgate::http
