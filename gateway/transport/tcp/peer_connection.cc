#include "gateway/transport/tcp/peer_connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

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
                               TransportCounters& counters, LinkMeter& meter,
                               ConnectionOwner& owner)
    : socket_(std::move(socket)),
      rank_(rank),
      limits_(limits),
      counters_(counters),
      owner_(owner),
      meter_(meter) {}

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
                     self->inbound_started_ = LinkMeter::Clock::now();
                     Result<Length> length =
                         decode_length(self->inbound_length_, self->limits_.max_message_bytes);
                     if (!length.ok()) {
                       ++self->counters_.rejected;
                       return self->close(length.status().message());
                     }
                     self->read_body(*length);
                   });
}

void PeerConnection::read_body(Length length) {
  try {
    inbound_.resize(length.bytes);
  } catch (const std::bad_alloc&) {
    ++counters_.rejected;
    return close("no memory for a message of " + std::to_string(length.bytes) + " bytes");
  }
  asio::async_read(
      socket_, asio::buffer(inbound_),
      [total = length.bytes](const error_code& ec, std::size_t transferred) {
        return everything_left(ec, transferred, total);
      },
      [self = shared_from_this(), probe = length.probe](const error_code& ec, std::size_t) {
        if (ec) return self->fail(ec);
        const uint64_t size = self->inbound_.size();
        self->meter_.add_transfer(size, self->inbound_started_, LinkMeter::Clock::now());
        self->counters_.bytes_received += kLengthPrefixBytes + size;
        if (probe) {
          ++self->counters_.probes_received;
          return self->read_length();
        }
        ++self->counters_.messages_received;
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
  const auto bytes = static_cast<uint32_t>(message->size());
  push_locked({std::move(message), bytes, false});
  return {};
}

void PeerConnection::push_locked(Outgoing outgoing) {
  const uint64_t framed = kLengthPrefixBytes + outgoing.bytes;
  queue_.push_back(std::move(outgoing));
  queued_bytes_ += framed;
  counters_.queued_bytes += framed;
  if (!writing_) {
    writing_ = true;
    asio::post(socket_.get_executor(), [self = shared_from_this()] { self->write_next(); });
  }
}

bool PeerConnection::enqueue_probe(uint32_t bytes) {
  // Probes are never read: every one is a prefix of the same zeroed bytes (never memory that
  // held anything else).
  static const auto kProbeBody = std::make_shared<const MessageBytes>(kMaxProbeBytes, std::byte{0});
  if (bytes == 0 || bytes > kMaxProbeBytes) return false;
  std::lock_guard lock(mutex_);
  if (closed_ || !queue_.empty()) return false;
  push_locked({kProbeBody, bytes, true});
  return true;
}

LinkMeter::Clock::time_point PeerConnection::last_measurable_send() const {
  std::lock_guard lock(mutex_);
  return last_measurable_send_;
}

double PeerConnection::rtt_seconds() const {
  tcp_info info{};
  socklen_t length = sizeof(info);
  auto& socket = const_cast<asio::ip::tcp::socket&>(socket_);  // getsockopt does not change it
  if (::getsockopt(socket.native_handle(), IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return 0;
  return info.tcpi_rtt * 1e-6;
}

void PeerConnection::write_next() {
  Outgoing next;
  {
    std::lock_guard lock(mutex_);
    if (closed_ || queue_.empty()) {
      writing_ = false;
      return;
    }
    next = queue_.front();
  }
  outbound_length_ = encode_length(next.bytes, next.probe);
  const std::array<asio::const_buffer, 2> buffers = {
      asio::buffer(outbound_length_), asio::buffer(next.message->data(), next.bytes)};
  const uint64_t framed = kLengthPrefixBytes + next.bytes;
  asio::async_write(
      socket_, buffers,
      [framed](const error_code& ec, std::size_t transferred) {
        return everything_left(ec, transferred, framed);
      },
      [self = shared_from_this(), next, framed](const error_code& ec, std::size_t) {
        self->on_written(ec, framed, next.probe);
      });
}

void PeerConnection::on_written(const error_code& ec, uint64_t framed_bytes, bool probe) {
  if (ec) return fail(ec);
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    queue_.pop_front();
    queued_bytes_ -= framed_bytes;
    counters_.queued_bytes -= framed_bytes;
    if (framed_bytes >= kLengthPrefixBytes + LinkMeter::kMinMeasuredBytes) {
      last_measurable_send_ = LinkMeter::Clock::now();
    }
  }
  ++(probe ? counters_.probes_sent : counters_.messages_sent);
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
