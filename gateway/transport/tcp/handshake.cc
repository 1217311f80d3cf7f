#include "gateway/transport/tcp/handshake.h"

#include <memory>
#include <string>
#include <utility>

#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

namespace gradgate::gateway::tcp {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;

class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(asio::ip::tcp::socket socket, const Hello& ours, HelloCheck check, HandshakeDone done)
      : socket_(std::move(socket)),
        deadline_(socket_.get_executor()),
        ours_(encode_handshake(ours)),
        check_(std::move(check)),
        done_(std::move(done)) {}

  void start(HandshakeRole role, std::chrono::milliseconds timeout) {
    deadline_.expires_after(timeout);
    deadline_.async_wait([self = shared_from_this()](const error_code& ec) {
      if (ec) return;  // cancelled: the exchange finished first
      self->timed_out_ = true;
      error_code ignored;
      self->socket_.close(ignored);
    });
    if (role == HandshakeRole::kDialer) {
      write_ours([self = shared_from_this()] { self->read_theirs(/*answer=*/false); });
    } else {
      read_theirs(/*answer=*/true);
    }
  }

 private:
  template <typename Next>
  void write_ours(Next next) {
    asio::async_write(socket_, asio::buffer(ours_),
                      [self = shared_from_this(), next](const error_code& ec, std::size_t) {
                        if (ec) return self->fail_io(ec);
                        next();
                      });
  }

  void read_theirs(bool answer) {
    asio::async_read(socket_, asio::buffer(theirs_),
                     [self = shared_from_this(), answer](const error_code& ec, std::size_t) {
                       if (ec) return self->fail_io(ec);
                       self->check_theirs(answer);
                     });
  }

  void check_theirs(bool answer) {
    Result<Hello> hello = decode_handshake(theirs_);
    if (hello.ok()) {
      Status accepted = check_(*hello);
      if (!accepted.ok()) hello = std::move(accepted);
    }
    if (!hello.ok()) return finish(std::move(hello));
    if (!answer) return finish(std::move(hello));
    write_ours([self = shared_from_this(), hello] { self->finish(hello); });
  }

  void fail_io(const error_code& ec) {
    if (timed_out_) return finish(Status(ErrorCode::kTimeout, "handshake: deadline passed"));
    finish(Status(ErrorCode::kUnavailable, "handshake: " + ec.message()));
  }

  void finish(Result<Hello> hello) {
    deadline_.cancel();
    if (timed_out_ && hello.ok()) hello = Status(ErrorCode::kTimeout, "handshake: deadline passed");
    if (!hello.ok()) {
      error_code ignored;
      socket_.close(ignored);
    }
    done_(std::move(hello), std::move(socket_));
  }

  asio::ip::tcp::socket socket_;
  asio::steady_timer deadline_;
  HandshakeBytes ours_;
  HandshakeBytes theirs_{};
  HelloCheck check_;
  HandshakeDone done_;
  bool timed_out_ = false;
};

}  // namespace

void run_handshake(asio::ip::tcp::socket socket, HandshakeRole role, const Hello& ours,
                   std::chrono::milliseconds timeout, HelloCheck check, HandshakeDone done) {
  std::make_shared<Exchange>(std::move(socket), ours, std::move(check), std::move(done))
      ->start(role, timeout);
}

}  // namespace gradgate::gateway::tcp
