#include "gateway/transport/tcp/peer_connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
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

PeerConnection::PeerConnection(asio::ip::tcp::socket socket, uint32_t rank, PeerSession& session,
                               uint64_t write_from, uint64_t max_message_bytes,
                               TransportCounters& counters, LinkMeter& meter,
                               ConnectionOwner& owner)
    : socket_(std::move(socket)),
      rank_(rank),
      session_(session),
      max_message_bytes_(max_message_bytes),
      counters_(counters),
      meter_(meter),
      owner_(owner),
      next_write_(write_from),
      acknowledged_sent_(session.delivered()),
      last_heard_(Clock::now()),
      last_written_(last_heard_) {}

void PeerConnection::start() {
  read_length();
  write_next();
}

namespace {

// Asio's transfer_all asks for at most 64 KiB per read_some or write_some; large frames move in
// far fewer system calls when each call may take everything that is left.
std::size_t everything_left(const error_code& ec, std::size_t transferred, std::size_t total) {
  return ec ? 0 : total - transferred;
}

}  // namespace

void PeerConnection::read_length() {
  asio::async_read(
      socket_, asio::buffer(inbound_length_),
      [self = shared_from_this()](const error_code& ec, std::size_t) {
        if (self->closed_) return;
        if (ec) return self->fail(ec);
        self->heard();
        self->inbound_started_ = self->last_heard_;
        // Control frames have their own bound, whatever the limit on messages.
        Result<Length> length = decode_length(
            self->inbound_length_, std::max<uint64_t>(self->max_message_bytes_, kMaxProbeBytes));
        const uint64_t limit =
            length.ok() && length->control ? kMaxProbeBytes : self->max_message_bytes_;
        if (length.ok() && length->bytes > limit) {
          length = Status(ErrorCode::kMalformedFrame,
                          std::string(length->control ? "a control frame" : "a message") + " of " +
                              std::to_string(length->bytes) + " bytes is over its limit of " +
                              std::to_string(limit));
        }
        if (!length.ok()) {
          ++self->counters_.rejected;
          return self->close(length.status().message(), PeerDownReason::kProtocol);
        }
        self->read_body(*length);
      });
}

void PeerConnection::read_body(Length length) {
  try {
    inbound_.resize(length.bytes);
  } catch (const std::bad_alloc&) {
    ++counters_.rejected;
    return close("no memory for a message of " + std::to_string(length.bytes) + " bytes",
                 PeerDownReason::kProtocol);
  }
  asio::async_read(
      socket_, asio::buffer(inbound_),
      [self = shared_from_this(), total = length.bytes](const error_code& ec,
                                                        std::size_t transferred) {
        if (transferred > 0) self->heard();  // a slow link: bytes still move
        return everything_left(ec, transferred, total);
      },
      [self = shared_from_this(), control = length.control](const error_code& ec, std::size_t) {
        if (self->closed_) return;
        if (ec) return self->fail(ec);
        self->heard();
        const uint64_t size = self->inbound_.size();
        self->meter_.add_transfer(size, self->inbound_started_, self->last_heard_);
        self->counters_.bytes_received += kLengthPrefixBytes + size;
        if (control) {
          self->on_control(self->inbound_);
          if (!self->closed_) self->read_length();
          return;
        }
        ++self->counters_.messages_received;
        if (!self->owner_.deliver(self->rank_, std::exchange(self->inbound_, {}))) {
          ++self->counters_.rejected;
          return self->close(
              "a message of " + std::to_string(size) + " bytes was rejected by the handler",
              PeerDownReason::kProtocol);
        }
        self->session_.count_delivered();
        self->ack_due_ = true;
        self->write_next();
        self->read_length();
      });
}

void PeerConnection::on_control(std::span<const std::byte> body) {
  Result<Control> control = decode_control(body);
  if (!control.ok()) {
    ++counters_.rejected;
    return close(control.status().message(), PeerDownReason::kProtocol);
  }
  switch (control->kind) {
    case ControlKind::kProbe:
      ++counters_.probes_received;
      return;
    case ControlKind::kAck:
      if (control->delivered > next_write_) {
        ++counters_.rejected;
        return close("the peer acknowledged " + std::to_string(control->delivered) + " messages; " +
                         std::to_string(next_write_) + " were written",
                     PeerDownReason::kProtocol);
      }
      if (Status taken = session_.acknowledge(control->delivered); !taken.ok()) {
        ++counters_.rejected;
        return close(taken.message(), PeerDownReason::kProtocol);
      }
      return;
    case ControlKind::kGoodbye:
      return close("the peer is stopping", PeerDownReason::kStopped);
  }
}

void PeerConnection::kick() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->write_next(); });
}

bool PeerConnection::enqueue_probe(uint32_t bytes) {
  if (closed_ || writing_ || bytes == 0 || bytes > kMaxProbeBytes) return false;
  if (session_.message(next_write_)) return false;
  probe_bytes_ = bytes;
  write_next();
  return true;
}

void PeerConnection::heartbeat() {
  if (closed_ || writing_) return;
  ack_due_ = true;
  write_next();
}

namespace {

// TCP_INFO of `socket`; false when it cannot be read.
bool read_tcp_info(const asio::ip::tcp::socket& socket, ::tcp_info& info) {
  socklen_t length = sizeof(info);
  auto& readable = const_cast<asio::ip::tcp::socket&>(socket);  // getsockopt does not change it
  return ::getsockopt(readable.native_handle(), IPPROTO_TCP, TCP_INFO, &info, &length) == 0;
}

}  // namespace

PeerConnection::Clock::time_point PeerConnection::last_acknowledged() const {
  ::tcp_info info{};
  if (!read_tcp_info(socket_, info)) return last_written_;
  return Clock::now() - std::chrono::milliseconds(info.tcpi_last_ack_recv);
}

double PeerConnection::rtt_seconds() const {
  ::tcp_info info{};
  return read_tcp_info(socket_, info) ? info.tcpi_rtt * 1e-6 : 0.0;
}

void PeerConnection::write_next() {
  if (closed_ || writing_ || goodbye_written_) return;
  if (goodbye_) {
    static constexpr std::array<std::byte, kGoodbyeBytes> kGoodbye = {
        std::byte{static_cast<uint8_t>(ControlKind::kGoodbye)}};
    outbound_length_ = encode_length(kGoodbyeBytes, /*control=*/true);
    return write_frame({asio::buffer(outbound_length_), asio::buffer(kGoodbye)},
                       kLengthPrefixBytes + kGoodbyeBytes, Pending::kGoodbye);
  }
  if (ack_due_) {
    ack_due_ = false;
    acknowledged_sent_ = session_.delivered();
    outbound_ack_ = encode_ack(acknowledged_sent_);
    outbound_length_ = encode_length(kAckBytes, /*control=*/true);
    return write_frame({asio::buffer(outbound_length_), asio::buffer(outbound_ack_)},
                       kLengthPrefixBytes + kAckBytes, Pending::kAck);
  }
  if (Message message = session_.message(next_write_)) {
    if (session_.note_written(next_write_)) {
      ++counters_.resent_messages;
      counters_.resent_bytes += kLengthPrefixBytes + message->size();
    }
    ++next_write_;
    const auto bytes = static_cast<uint32_t>(message->size());
    outbound_length_ = encode_length(bytes);
    // The buffers point into `message`, which the session holds until the peer acknowledges
    // it, or, if the session is dropped meanwhile, the completion handler's copy.
    std::vector<asio::const_buffer> buffers = {asio::buffer(outbound_length_),
                                               asio::buffer(message->data(), bytes)};
    return write_frame(std::move(buffers), kLengthPrefixBytes + bytes, Pending::kMessage,
                       std::move(message));
  }
  if (probe_bytes_ > 0) {
    // Probes are never read: every one is a prefix of the same zeroed bytes (never memory that
    // held anything else); the first byte, 0, says "probe".
    static const auto kProbeBody =
        std::make_shared<const MessageBytes>(kMaxProbeBytes, std::byte{0});
    const uint32_t bytes = std::exchange(probe_bytes_, 0);
    outbound_length_ = encode_length(bytes, /*control=*/true);
    return write_frame({asio::buffer(outbound_length_), asio::buffer(kProbeBody->data(), bytes)},
                       kLengthPrefixBytes + bytes, Pending::kProbe, kProbeBody);
  }
}

void PeerConnection::write_frame(std::vector<asio::const_buffer> buffers, uint64_t framed_bytes,
                                 Pending what, Message keep) {
  writing_ = true;
  asio::async_write(
      socket_, buffers,
      [framed_bytes](const error_code& ec, std::size_t transferred) {
        return everything_left(ec, transferred, framed_bytes);
      },
      [self = shared_from_this(), framed_bytes, what, keep = std::move(keep)](
          const error_code& ec, std::size_t) { self->on_written(ec, framed_bytes, what); });
}

void PeerConnection::on_written(const error_code& ec, uint64_t framed_bytes, Pending what) {
  writing_ = false;
  if (closed_) return;
  if (ec) return fail(ec);
  last_written_ = Clock::now();
  if (what != Pending::kAck && framed_bytes >= kLengthPrefixBytes + LinkMeter::kMinMeasuredBytes) {
    last_measurable_send_ = last_written_;
  }
  if (what == Pending::kMessage) ++counters_.messages_sent;
  if (what == Pending::kProbe) ++counters_.probes_sent;
  counters_.bytes_sent += framed_bytes;
  if (what == Pending::kGoodbye) {
    goodbye_written_ = true;
    return std::exchange(goodbye_, nullptr)();
  }
  write_next();
}

void PeerConnection::fail(const error_code& ec) {
  close(ec == asio::error::eof ? std::string("closed by the peer") : ec.message());
}

void PeerConnection::close(const std::string& reason, std::optional<PeerDownReason> lost) {
  if (closed_) return;
  closed_ = true;
  if (goodbye_) std::exchange(goodbye_, nullptr)();  // no goodbye to wait for any more
  error_code ignored;
  socket_.set_option(asio::socket_base::linger(true, 0), ignored);
  socket_.close(ignored);
  owner_.connection_closed(*this, reason, lost);
}

void PeerConnection::say_goodbye(std::function<void()> written) {
  if (closed_) return written();
  goodbye_ = std::move(written);
  write_next();
}

void PeerConnection::close_quietly() {
  if (closed_) return;
  closed_ = true;
  std::array<std::byte, 64 << 10> sink{};
  for (int reads = 0; reads < 64; ++reads) {
    if (::recv(socket_.native_handle(), sink.data(), sink.size(), MSG_DONTWAIT) <= 0) break;
  }
  error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
}

}  // namespace gradgate::gateway::tcp
