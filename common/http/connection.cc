#include "common/http/connection.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>
#include <memory>
#include <optional>

#include "common/http/dispatch.h"
#include "common/http/problem.h"

namespace gradgate::http {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace beast_http = boost::beast::http;
using error_code = boost::system::error_code;

constexpr std::size_t kDrainChunkBytes = 16 * 1024;
// How long a connection refused over the limit may take to write its 503, and then its client
// to close.
constexpr std::chrono::milliseconds kRefusedCloseTime{1000};
// How long a read cancelled at its deadline may take to end before the socket is closed.
constexpr std::chrono::milliseconds kCancelGrace{100};

bool is_parse_error(const error_code& error) {
  return error.category() == beast_http::make_error_code(beast_http::error::bad_target).category();
}

class Connection final : public Evictable, public std::enable_shared_from_this<Connection> {
 public:
  // `ticket`: the slot of `slots` this connection holds, given back when it is destroyed; none
  // for a connection refused over the limit (it holds one of the slots' refusals).
  Connection(net::ip::tcp::socket socket, const ServerOptions& options, const Router& router,
             std::shared_ptr<AnswerGate> gate, std::shared_ptr<ConnectionSlots> slots,
             std::optional<ConnectionSlots::Ticket> ticket)
      : stream_(std::move(socket)),
        read_deadline_(stream_.get_executor()),
        answer_wait_(stream_.get_executor()),
        options_(options),
        router_(router),
        gate_(std::move(gate)),
        slots_(std::move(slots)),
        ticket_(ticket) {}
  ~Connection() override {
    if (ticket_) {
      slots_->give_back(*ticket_);
    } else {
      slots_->give_back_refusal();
    }
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // A request that arrived and is not answered yet: bytes in the socket, or a whole request read
  // whose handler has not run. A request begun but not whole does not count, or a client could
  // hold its slot by sending one byte and stalling.
  bool has_input() const override {
    error_code ignored;
    if (stream_.socket().available(ignored) > 0) return true;
    return !closing_ && parser_ && parser_->is_done();
  }

  // A new connection takes this one's slot: closing the socket ends whatever read is pending (a
  // cancel would not stick to a read that completes meanwhile and starts the next).
  void evict() override {
    evicted_ = true;
    read_deadline_.cancel();
    error_code ignored;
    stream_.socket().close(ignored);
  }

  void read_request() {
    wait_for_client(ConnectionSlots::Wait::kRequest);
    route_ = {};
    parser_.emplace();
    parser_->body_limit(options_.max_body_bytes);
    parser_->header_limit(options_.max_header_bytes);
    // Our own deadline rather than the stream's: the stream's closes the socket when it fires,
    // and a client that is too slow should still get its 408.
    timed_out_ = false;
    const uint64_t read_number = ++reads_started_;
    read_deadline_.expires_after(options_.request_timeout);
    read_deadline_.async_wait([self = shared_from_this(), read_number](const error_code& error) {
      self->on_read_deadline(error, read_number);
    });
    stream_.expires_never();
    beast_http::async_read(stream_, buffer_, *parser_,
                           [self = shared_from_this()](const error_code& error, std::size_t) {
                             self->on_read(error);
                           });
  }

  // Answers a connection over the limit before it sends anything (to HEAD too, with the body),
  // and closes it.
  void refuse_over_limit(uint32_t limit) {
    Response response =
        problem(status::service_unavailable, {},
                "the server's " + std::to_string(limit) +
                    " connections are all busy with requests (server limit); retry later");
    response.headers.emplace_back("Retry-After", "1");
    refuse(std::move(response));
  }

 private:
  // Cancels the read so that the client gets its 408. A cancel does not stick to a read that
  // completes meanwhile (the composed read goes on with the next one): if the read still runs a
  // moment later, the socket is closed instead, without an answer.
  void on_read_deadline(const error_code& error, uint64_t read_number) {
    if (error || read_number != reads_started_ || reads_finished_ == read_number) return;
    error_code ignored;
    if (timed_out_) {
      stream_.socket().close(ignored);
      return;
    }
    timed_out_ = true;
    stream_.socket().cancel(ignored);
    read_deadline_.expires_after(kCancelGrace);
    read_deadline_.async_wait([self = shared_from_this(), read_number](const error_code& again) {
      self->on_read_deadline(again, read_number);
    });
  }

  // While waiting for the client (its request, or its close) the slot may go to a new
  // connection; while working on a request it is kept.
  void wait_for_client(ConnectionSlots::Wait wait) {
    if (ticket_) slots_->waiting(*ticket_, wait, weak_from_this());
  }
  void work_on_request() {
    if (ticket_) slots_->busy(*ticket_);
  }

  void on_read(const error_code& error) {
    reads_finished_ = reads_started_;
    read_deadline_.cancel();
    if (evicted_) return;  // dropping `this` closes
    work_on_request();
    if (timed_out_ && error) {
      // An idle keep-alive connection is closed quietly; a request cut short gets its 408.
      if (!parser_->got_some() && buffer_.size() == 0) return;
      return refuse(problem(status::request_timeout, {},
                            "the request did not arrive within " +
                                std::to_string(options_.request_timeout.count()) + " ms"));
    }
    if (error == beast_http::error::body_limit) {
      return refuse(problem(status::payload_too_large, {},
                            "the body is larger than the limit of " +
                                std::to_string(options_.max_body_bytes) + " bytes"));
    }
    if (error == beast_http::error::header_limit) {
      return refuse(problem(status::request_header_fields_too_large, {},
                            "the request line and headers are larger than the limit of " +
                                std::to_string(options_.max_header_bytes) + " bytes"));
    }
    if (error == beast_http::error::end_of_stream) return close_gracefully();
    if (error && is_parse_error(error) && error != beast_http::error::partial_message) {
      return refuse(problem(status::bad_request, {}, "malformed HTTP request: " + error.message()));
    }
    if (error) return;  // the client went away, or the server stops: dropping `this` closes
    const Request::Message& request = parser_->get();
    Dispatched dispatched = dispatch(router_, options_.token, request, responder());
    route_ = dispatched.route;
    if (!dispatched.response) return await_answer();
    write(std::move(*dispatched.response), request);
  }

  // The Responder of the current request: it posts the response to this connection's strand,
  // while the server runs and the connection lives. It holds nothing of the I/O context (no
  // executor): a Responder may outlive the server.
  Responder responder() {
    return Responder([connection = weak_from_this(), gate = gate_](Response response) {
      gate->run_if_open([&] {
        const std::shared_ptr<Connection> alive = connection.lock();
        if (!alive) return;
        net::post(alive->stream_.get_executor(),
                  [connection, response = std::move(response)]() mutable {
                    if (auto self = connection.lock()) self->answer(std::move(response));
                  });
      });
    });
  }

  // Waits for a deferred route's answer. The timer owns the connection meanwhile (the server's
  // stop destroys it with the timer); the socket wait notices a client that closes.
  void await_answer() {
    awaiting_answer_ = true;
    answer_wait_.expires_at(net::steady_timer::time_point::max());
    answer_wait_.async_wait([self = shared_from_this()](const error_code&) {});
    stream_.socket().async_wait(net::socket_base::wait_read,
                                [self = shared_from_this()](const error_code& error) {
                                  self->on_readable_while_waiting(error);
                                });
  }

  void on_readable_while_waiting(const error_code& error) {
    if (error || !awaiting_answer_) return;
    // Readable before the answer: the client closed (nothing to peek), or sent its next request
    // early, which is read after the answer.
    char next;
    error_code peek_error;
    const std::size_t peeked =
        stream_.socket().receive(net::buffer(&next, 1), net::socket_base::message_peek, peek_error);
    if (peeked > 0 && !peek_error) return;
    awaiting_answer_ = false;
    answer_wait_.cancel();  // drops the last owner: the connection closes
  }

  void answer(Response response) {
    if (!awaiting_answer_) return;
    awaiting_answer_ = false;
    answer_wait_.cancel();
    error_code ignored;
    stream_.socket().cancel(ignored);  // the wait for the client closing
    write(std::move(response), parser_->get());
  }

  // Answers a request that could not be read whole; the connection cannot go on after it.
  void refuse(Response response) {
    const bool head =
        parser_ && parser_->is_header_done() && parser_->get().method() == beast_http::verb::head;
    write(std::move(response), 11, false, head);
  }

  // The answer to `request`; to HEAD, its header alone (Content-Length as for GET).
  void write(Response response, const Request::Message& request) {
    write(std::move(response), request.version(), request.keep_alive(),
          request.method() == beast_http::verb::head);
  }

  void write(Response response, unsigned version, bool keep_alive, bool header_only) {
    if (options_.on_response) options_.on_response(route_, response.code);
    response_ = {};
    response_.version(version);
    response_.result(response.code);
    if (!response.content_type.empty()) {
      response_.set(beast_http::field::content_type, response.content_type);
    }
    for (auto& [name, value] : response.headers) response_.insert(name, value);
    response_.body() = std::move(response.body);
    response_.keep_alive(keep_alive);
    response_.prepare_payload();
    if (header_only) response_.body().clear();
    stream_.expires_after(close_time());
    beast_http::async_write(stream_, response_,
                            [self = shared_from_this()](const error_code& error, std::size_t) {
                              self->on_write(error);
                            });
  }

  void on_write(const error_code& error) {
    if (error) return;
    if (response_.keep_alive()) return read_request();
    close_gracefully();
  }

  // Sends FIN, then reads and drops what the client still sends (the rest of an oversized body)
  // until it closes or the timeout passes: closing with unread data would reset the connection
  // and could destroy our response before the client reads it.
  void close_gracefully() {
    closing_ = true;
    wait_for_client(ConnectionSlots::Wait::kClose);
    error_code ignored;
    stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
    // Our own deadline, checked after every read: the stream's is never seen to expire while a
    // client sends without pause (each read completes before the timer's handler runs).
    drain_until_ = std::chrono::steady_clock::now() + close_time();
    stream_.expires_at(drain_until_);
    drain();
  }

  void drain() {
    buffer_.clear();
    stream_.async_read_some(
        buffer_.prepare(kDrainChunkBytes),
        [self = shared_from_this()](const error_code& error, std::size_t) {
          if (!error && !self->evicted_ && std::chrono::steady_clock::now() < self->drain_until_) {
            self->drain();
          }
        });
  }

  // How long a response may take to write, and the client to close after the last one: the
  // request timeout, or for a connection refused over the limit at most a second (it holds a
  // descriptor and a buffer outside the limit).
  std::chrono::milliseconds close_time() const {
    return ticket_ ? options_.request_timeout
                   : std::min(options_.request_timeout, kRefusedCloseTime);
  }

  beast::tcp_stream stream_;
  net::steady_timer read_deadline_;
  net::steady_timer answer_wait_;
  const ServerOptions& options_;
  const Router& router_;
  std::shared_ptr<AnswerGate> gate_;
  std::shared_ptr<ConnectionSlots> slots_;
  std::optional<ConnectionSlots::Ticket> ticket_;
  bool evicted_ = false;
  bool closing_ = false;
  std::chrono::steady_clock::time_point drain_until_{};
  beast::flat_buffer buffer_;
  std::optional<beast_http::request_parser<beast_http::string_body>> parser_;
  beast_http::response<beast_http::string_body> response_;
  uint64_t reads_started_ = 0;
  uint64_t reads_finished_ = 0;
  bool timed_out_ = false;
  bool awaiting_answer_ = false;
  std::string_view route_;  // the pattern of the current request's route (owned by the router)
};

}  // namespace

void serve_connection(net::ip::tcp::socket socket, const ServerOptions& options,
                      const Router& router, std::shared_ptr<AnswerGate> gate,
                      std::shared_ptr<ConnectionSlots> slots) {
  if (const auto ticket = slots->take()) {
    std::make_shared<Connection>(std::move(socket), options, router, std::move(gate),
                                 std::move(slots), ticket)
        ->read_request();
  } else if (slots->take_refusal()) {
    const uint32_t limit = slots->limit();
    std::make_shared<Connection>(std::move(socket), options, router, std::move(gate),
                                 std::move(slots), std::nullopt)
        ->refuse_over_limit(limit);
  }  // else: too many refused already; dropping the socket closes it
}

}  // namespace gradgate::http
