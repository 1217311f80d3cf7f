#include "gateway/transport/tcp/peer_connection.h"

#include <array>
#include <new>
#include <utility>

#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

namespace gradgate::gateway::tcp {

namespace asio = boost::asio;
using boost::system::error_code;

PeerConnection::PeerConnection(asio::ip::tcp::socket socket, uint32_t rank, Limits limits,
                               Counters& counters, ConnectionOwner& owner)
    : socket_(std::move(socket)),
      rank_(rank),
      limits_(limits),
      counters_(counters),
      owner_(owner) {}

void PeerConnection::start() { read_length(); }

namespace {

// Asio's transfer_all asks for at most 64 KiB per read_some or write_some; large frames move in
// far fewer system calls when each call may take everything that is left.
std::size_t everything_left(const error_code& ec, std::size_t transferred, std::size_t total) {
  return ec ? 0 : total - transferred;
}

}  // namespace

void PeerConnection::read_length() {
  asio::async_read(socket_, asio::buffer(inbound_length_),
                   [self = shared_from_this()](const error_code& ec, std::size_t) {
                     if (ec) return self->fail(ec);
                     Result<uint32_t> length =
                         decode_length(self->inbound_length_, self->limits_.max_message_bytes);
                     if (!length.ok()) {
                       ++self->counters_.rejected;
                       return self->close(length.status().message());
                     }
                     self->read_body(*length);
                   });
}

void PeerConnection::read_body(uint32_t length) {
  try {
    inbound_.resize(length);
  } catch (const std::bad_alloc&) {
    ++counters_.rejected;
    return close("no memory for a message of " + std::to_string(length) + " bytes");
  }
  asio::async_read(socket_, asio::buffer(inbound_),
                   [length](const error_code& ec, std::size_t transferred) {
                     return everything_left(ec, transferred, length);
                   },
                   [self = shared_from_this()](const error_code& ec, std::size_t) {
                     if (ec) return self->fail(ec);
                     const uint64_t size = self->inbound_.size();
                     ++self->counters_.messages_received;
                     self->counters_.bytes_received += kLengthPrefixBytes + size;
                     if (!self->owner_.deliver(self->rank_, std::exchange(self->inbound_, {}))) {
                       ++self->counters_.rejected;
                       return self->close("a message of " + std::to_string(size) +
                                          " bytes was rejected by the handler");
                     }
                     self->read_length();
                   });
}

Status PeerConnection::enqueue(Message message) {
  const uint64_t framed = kLengthPrefixBytes + message->size();
  std::lock_guard lock(mutex_);
  if (closed_) return Status(ErrorCode::kUnavailable, "peer " + std::to_string(rank_) + " is down");
  if (queued_bytes_ + framed > limits_.send_queue_bytes) {
    return Status(ErrorCode::kResourceExhausted,
                  "send queue of peer " + std::to_string(rank_) + " holds " +
                      std::to_string(queued_bytes_) + " bytes; " + std::to_string(framed) +
                      " more would exceed the cap of " + std::to_string(limits_.send_queue_bytes));
  }
  queue_.push_back(std::move(message));
  queued_bytes_ += framed;
  counters_.queued_bytes += framed;
  if (!writing_) {
    writing_ = true;
    asio::post(socket_.get_executor(), [self = shared_from_this()] { self->write_next(); });
  }
  return {};
}

void PeerConnection::write_next() {
  Message message;
  {
    std::lock_guard lock(mutex_);
    if (closed_ || queue_.empty()) {
      writing_ = false;
      return;
    }
    message = queue_.front();
  }
  outbound_length_ = encode_length(static_cast<uint32_t>(message->size()));
  const std::array<asio::const_buffer, 2> buffers = {asio::buffer(outbound_length_),
                                                     asio::buffer(*message)};
  const uint64_t framed = kLengthPrefixBytes + message->size();
  asio::async_write(socket_, buffers,
                    [framed](const error_code& ec, std::size_t transferred) {
                      return everything_left(ec, transferred, framed);
                    },
                    [self = shared_from_this(), message, framed](
                        const error_code& ec, std::size_t) { self->on_written(ec, framed); });
}

void PeerConnection::on_written(const error_code& ec, uint64_t framed_bytes) {
  if (ec) return fail(ec);
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    queue_.pop_front();
    queued_bytes_ -= framed_bytes;
    counters_.queued_bytes -= framed_bytes;
  }
  ++counters_.messages_sent;
  counters_.bytes_sent += framed_bytes;
  write_next();
}

void PeerConnection::fail(const error_code& ec) {
  close(ec == asio::error::eof ? std::string("closed by the peer") : ec.message());
}

void PeerConnection::close(const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    closed_ = true;
    counters_.queued_bytes -= queued_bytes_;
    queued_bytes_ = 0;
    queue_.clear();
  }
  error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  owner_.connection_closed(*this, reason);
}

}  // namespace gradgate::gateway::tcp
