// One established connection to a peer gateway (after the handshake), carrying that peer's
// session (peer_session.h): reads frames, hands messages to the owner and acknowledges them, and
// writes the session's messages in order from where the peer's delivery count says, one write at
// a time, each as a gather write of its length prefix and the shared message bytes (no copy).
// Control frames go between messages: acknowledgements (also the heartbeat of an idle
// connection), probes and the goodbye. Large messages and probes that arrive are timed into the
// peer's LinkMeter.
//
// Threads: kick() may be called from any thread; everything else runs on the transport's thread.
// The connection closes itself on an I/O error, a malformed frame, a message the owner rejects or
// the peer's goodbye, and tells the owner exactly once; the session (and what it holds) is the
// owner's to keep or drop.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <boost/asio/ip/tcp.hpp>

#include "gateway/transport/counters.h"
#include "gateway/transport/link_meter.h"
#include "gateway/transport/tcp/peer_session.h"
#include "gateway/transport/tcp/wire.h"
#include "gateway/transport/transport.h"

namespace gradgate::gateway::tcp {

class PeerConnection;

/// What a connection reports to whoever owns it; called on the transport's thread.
class ConnectionOwner {
 public:
  /// A whole message; false rejects it (the connection then counts it and closes).
  virtual bool deliver(uint32_t rank, MessageBytes&& message) = 0;
  /// The connection closed; `reason` says why, for the log. `lost` is set when the session
  /// cannot go on over another connection: the peer said goodbye or broke the protocol.
  virtual void connection_closed(PeerConnection& connection, const std::string& reason,
                                 std::optional<PeerDownReason> lost) = 0;

 protected:
  ~ConnectionOwner() = default;
};

class PeerConnection : public std::enable_shared_from_this<PeerConnection> {
 public:
  using Clock = LinkMeter::Clock;
  /// The largest probe: on a 10 Gb/s link it takes about 3 ms, long enough to time.
  static constexpr uint32_t kMaxProbeBytes = 4u << 20;

  /// Writes `session`'s messages from sequence number `write_from` on; accepts messages of at
  /// most `max_message_bytes` from the peer.
  PeerConnection(boost::asio::ip::tcp::socket socket, uint32_t rank, PeerSession& session,
                 uint64_t write_from, uint64_t max_message_bytes, TransportCounters& counters,
                 LinkMeter& meter, ConnectionOwner& owner);

  uint32_t rank() const { return rank_; }

  /// Starts reading and writing.
  void start();
  /// The session may hold a message to write now. Any thread; never blocks on I/O.
  void kick();
  /// Queues a probe of `bytes` (at most kMaxProbeBytes) if nothing else is to be written: the
  /// peer times its arrival and drops it. False when not queued.
  bool enqueue_probe(uint32_t bytes);
  /// Writes an acknowledgement if nothing is being written: the peer hears from this side.
  void heartbeat();
  /// When bytes last came from the peer (or the connection came up).
  Clock::time_point last_heard() const { return last_heard_; }
  /// When this side last finished writing a frame (or the connection came up).
  Clock::time_point last_written() const { return last_written_; }
  /// When this side last finished writing a message the peer can time (epoch: never).
  Clock::time_point last_measurable_send() const { return last_measurable_send_; }
  /// When the peer's kernel last acknowledged bytes of this side's (the kernel's count; the
  /// connection's start if it cannot be read).
  Clock::time_point last_acknowledged() const;
  /// The kernel's smoothed round-trip time of the connection, 0 if unknown.
  double rtt_seconds() const;
  /// Closes the socket with a reset (what the kernel still holds to send is dropped: the session
  /// writes it again if the peer needs it, and a slow link is not kept busy by a connection that
  /// is gone); the first call reports to the owner (with `lost`, see ConnectionOwner).
  void close(const std::string& reason, std::optional<PeerDownReason> lost = std::nullopt);
  /// Writes the goodbye after the frame being written (nothing after it); `written` runs once
  /// it is written.
  void say_goodbye(std::function<void()> written);
  /// Once the transport's thread has stopped: closes without reporting to the owner, after
  /// reading what is unread (a close with unread bytes resets the connection, and the peer's
  /// kernel then drops what it has not read yet: the goodbye).
  void close_quietly();

 private:
  enum class Pending : uint8_t { kAck, kMessage, kProbe, kGoodbye };  // what a write carries
  void read_length();
  void read_body(Length length);
  void on_control(std::span<const std::byte> body);
  void write_next();
  /// Writes one frame; `keep` is held until the write completes.
  void write_frame(std::vector<boost::asio::const_buffer> buffers, uint64_t framed_bytes,
                   Pending what, Message keep = nullptr);
  void on_written(const boost::system::error_code& ec, uint64_t framed_bytes, Pending what);
  void fail(const boost::system::error_code& ec);
  void heard() { last_heard_ = Clock::now(); }

  boost::asio::ip::tcp::socket socket_;
  const uint32_t rank_;
  PeerSession& session_;
  const uint64_t max_message_bytes_;
  TransportCounters& counters_;
  LinkMeter& meter_;
  ConnectionOwner& owner_;

  LengthPrefix inbound_length_{};
  Clock::time_point inbound_started_{};  // when the current frame's prefix came
  MessageBytes inbound_;

  LengthPrefix outbound_length_{};
  AckBytes outbound_ack_{};
  uint64_t next_write_;             // sequence number of the next message to write
  uint64_t acknowledged_sent_ = 0;  // the delivery count in the last acknowledgement written
  uint32_t probe_bytes_ = 0;        // a probe to write when nothing else is (0: none)
  Clock::time_point last_heard_;
  Clock::time_point last_written_;
  Clock::time_point last_measurable_send_{};
  std::function<void()> goodbye_;  // set: the goodbye is due, and this runs once it is written
  bool goodbye_written_ = false;
  bool ack_due_ = false;
  bool writing_ = false;
  bool closed_ = false;
};

}  // namespace gradgate::gateway::tcp
