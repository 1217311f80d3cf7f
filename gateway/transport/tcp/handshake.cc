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
  Exchange(asio::ip::tcp::socket socket, HandshakeDone done)
      : socket_(std::move(socket)), deadline_(socket_.get_executor()), done_(std::move(done)) {}

  void dial(const Hello& ours, std::chrono::milliseconds timeout, HelloCheck check) {
    arm(timeout);
    write_ours(ours, [self = shared_from_this(), check = std::move(check)] {
      self->read_theirs([self, check](const Hello& theirs) {
        Status accepted = check(theirs);
        self->finish(accepted.ok() ? Result<Hello>(theirs) : Result<Hello>(std::move(accepted)));
      });
    });
  }

  void accept(std::chrono::milliseconds timeout, HelloAnswer answer) {
    arm(timeout);
    read_theirs([self = shared_from_this(), answer = std::move(answer)](const Hello& theirs) {
      Result<Hello> ours = answer(theirs);
      if (!ours.ok()) return self->finish(ours.status());
      self->write_ours(*ours, [self, theirs] { self->finish(theirs); });
    });
  }

 private:
  void arm(std::chrono::milliseconds timeout) {
    deadline_.expires_after(timeout);
    deadline_.async_wait([self = shared_from_this()](const error_code& ec) {
      if (ec) return;  // cancelled: the exchange finished first
      self->timed_out_ = true;
      error_code ignored;
      self->socket_.close(ignored);
    });
  }

  template <typename Next>
  void write_ours(const Hello& ours, Next next) {
    ours_ = ours;
    ours_bytes_ = encode_handshake(ours);
    asio::async_write(socket_, asio::buffer(ours_bytes_),
                      [self = shared_from_this(), next](const error_code& ec, std::size_t) {
                        if (ec) return self->fail_io(ec);
                        next();
                      });
  }

  template <typename Next>
  void read_theirs(Next next) {
    asio::async_read(socket_, asio::buffer(theirs_),
                     [self = shared_from_this(), next](const error_code& ec, std::size_t) {
                       if (ec) return self->fail_io(ec);
                       Result<Hello> hello = decode_handshake(self->theirs_);
                       if (!hello.ok()) return self->finish(hello.status());
                       next(*hello);
                     });
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
    done_(std::move(hello), ours_, std::move(socket_));
  }

  asio::ip::tcp::socket socket_;
  asio::steady_timer deadline_;
  Hello ours_{};
  HandshakeBytes ours_bytes_{};
  HandshakeBytes theirs_{};
  HandshakeDone done_;
  bool timed_out_ = false;
};

}  // namespace

void dial_handshake(asio::ip::tcp::socket socket, const Hello& ours,
                    std::chrono::milliseconds timeout, HelloCheck check, HandshakeDone done) {
  std::make_shared<Exchange>(std::move(socket), std::move(done))
      ->dial(ours, timeout, std::move(check));
}

void accept_handshake(asio::ip::tcp::socket socket, std::chrono::milliseconds timeout,
                      HelloAnswer answer, HandshakeDone done) {
  std::make_shared<Exchange>(std::move(socket), std::move(done))
      ->accept(timeout, std::move(answer));
}

}  // namespace gradgate::gateway::tcp
