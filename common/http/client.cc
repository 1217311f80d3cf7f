#include "common/http/client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

namespace gradgate::http {

namespace beast = boost::beast;
namespace asio = boost::asio;

void RequestCancel::cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
  for (asio::io_context* io : running_) io->stop();
}

// A request's io_context while it runs, known to its RequestCancel (if any), which stops it.
class RunningRequest {
 public:
  RunningRequest(RequestCancel* cancel, asio::io_context& io) : cancel_(cancel), io_(io) {
    if (cancel_ == nullptr) return;
    std::lock_guard lock(cancel_->mutex_);
    cancel_->running_.push_back(&io_);
  }
  ~RunningRequest() {
    if (cancel_ == nullptr) return;
    std::lock_guard lock(cancel_->mutex_);
    std::erase(cancel_->running_, &io_);
  }
  RunningRequest(const RunningRequest&) = delete;
  RunningRequest& operator=(const RunningRequest&) = delete;

  /// Whether the request was cancelled already.
  bool cancelled() const {
    if (cancel_ == nullptr) return false;
    std::lock_guard lock(cancel_->mutex_);
    return cancel_->cancelled_;
  }

  /// Readies the io_context for the next operation; false once cancelled. Under the cancel's
  /// lock, so that a cancel() either comes first or stops the operation about to run.
  bool resume() {
    if (cancel_ == nullptr) {
      io_.restart();
      return true;
    }
    std::lock_guard lock(cancel_->mutex_);
    if (cancel_->cancelled_) return false;
    io_.restart();
    return true;
  }

 private:
  RequestCancel* cancel_;
  asio::io_context& io_;
};

namespace {

Status aborted(const ClientOptions& options) {
  return Status(ErrorCode::kAborted,
                "request to " + options.host + ":" + std::to_string(options.port) + " cancelled");
}

Status failure(const beast::error_code& ec, const std::string& what, const ClientOptions& options) {
  if (ec == asio::error::operation_aborted) return aborted(options);
  const std::string where = options.host + ":" + std::to_string(options.port);
  const bool not_http =
      ec.category() == beast::http::make_error_code(beast::http::error::bad_version).category();
  const ErrorCode code = ec == beast::error::timeout ? ErrorCode::kTimeout
                         : not_http                  ? ErrorCode::kMalformedFrame
                                                     : ErrorCode::kUnavailable;
  return Status(code, what + " " + where + ": " + ec.message());
}

// Runs one asynchronous operation on `stream`, started by `start(handler)`, to its end; its
// error, or operation_aborted when the request was cancelled (the operation is then completed by
// closing the stream, while everything it refers to still exists). The stream's deadline covers
// only asynchronous operations (Beast ignores it for synchronous ones), so every step goes this
// way.
template <typename Start>
beast::error_code run_bounded(RunningRequest& request, asio::io_context& io,
                              beast::tcp_stream& stream, Start start) {
  beast::error_code error;
  bool finished = false;
  start([&error, &finished](const beast::error_code& result, auto&&) {
    error = result;
    finished = true;
  });
  if (request.resume()) io.run();
  if (finished) return error;
  stream.close();
  while (!finished) {  // another cancel() may stop this run too
    io.restart();
    io.run();
  }
  return asio::error::operation_aborted;
}

}  // namespace

Result<ClientResponse> send_request(const ClientOptions& options, verb method,
                                    const std::string& target, const std::string& body) {
  asio::io_context io;
  RunningRequest running(options.cancel, io);
  beast::tcp_stream stream(io);
  beast::error_code ec;
  if (running.cancelled()) return aborted(options);  // the name lookup cannot be cancelled
  asio::ip::tcp::resolver resolver(io);
  const auto addresses = resolver.resolve(options.host, std::to_string(options.port), ec);
  if (ec) return failure(ec, "resolving", options);
  stream.expires_after(options.timeout);  // one deadline for the whole exchange
  ec = run_bounded(running, io, stream, [&](auto done) { stream.async_connect(addresses, done); });
  if (ec) return failure(ec, "connecting to", options);

  beast::http::request<beast::http::string_body> request(method, target, 11);
  request.set(beast::http::field::host, options.host);
  request.set(beast::http::field::user_agent, "gradgate");
  if (!options.token.empty()) {
    request.set(beast::http::field::authorization, "Bearer " + options.token);
  }
  if (!body.empty()) {
    request.set(beast::http::field::content_type, "application/json");
    request.body() = body;
  }
  request.prepare_payload();
  ec = run_bounded(running, io, stream,
                   [&](auto done) { beast::http::async_write(stream, request, done); });
  if (ec) return failure(ec, "sending to", options);

  beast::flat_buffer buffer;
  beast::http::response_parser<beast::http::string_body> parser;
  parser.body_limit(options.max_body_bytes);
  ec = run_bounded(running, io, stream,
                   [&](auto done) { beast::http::async_read(stream, buffer, parser, done); });
  if (ec) return failure(ec, "reading the answer of", options);
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);  // the answer is in

  const auto& response = parser.get();
  return ClientResponse{response.result_int(),
                        std::string(response[beast::http::field::content_type]), response.body()};
}

Status expect_ok(const ClientResponse& response, const std::string& what) {
  if (response.status == 200) return {};
  return Status(ErrorCode::kUnavailable, what + " answered " + std::to_string(response.status) +
                                             ": " + response.body.substr(0, 500));
}

}  // namespace gradgate::http
