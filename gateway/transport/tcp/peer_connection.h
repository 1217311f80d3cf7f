// One established connection to a peer gateway (after the handshake): reads length-prefixed
// messages and hands them to the owner, and writes queued messages in order, one write at a
// time, each as a gather write of its length prefix and the shared message bytes (no copy).
// Large messages and probes that arrive are timed into the peer's LinkMeter; probes are dropped.
//
// Threads: enqueue() may be called from any thread; everything else runs on the transport's
// thread. The connection closes itself on an I/O error, a malformed length or a message the
// owner rejects, discards what is still queued, and tells the owner exactly once.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio/ip/tcp.hpp>

#include "gateway/transport/counters.h"
#include "gateway/transport/link_meter.h"
#include "gateway/transport/tcp/wire.h"
#include "gateway/transport/transport.h"

namespace gradgate::gateway::tcp {

class PeerConnection;

/// What a connection reports to whoever owns it; called on the transport's thread.
class ConnectionOwner {
 public:
  /// A whole message; false rejects it (the connection then counts it and closes).
  virtual bool deliver(uint32_t rank, MessageBytes&& message) = 0;
  /// The connection closed; `reason` says why, for the log.
  virtual void connection_closed(PeerConnection& connection, const std::string& reason) = 0;

 protected:
  ~ConnectionOwner() = default;
};

class PeerConnection : public std::enable_shared_from_this<PeerConnection> {
 public:
  /// The largest probe: on a 10 Gb/s link it takes about 3 ms, long enough to time.
  static constexpr uint32_t kMaxProbeBytes = 4u << 20;

  struct Limits {
    uint64_t send_queue_bytes = 0;   // framed bytes that may wait in the queue
    uint64_t max_message_bytes = 0;  // largest message accepted from the peer
  };

  PeerConnection(boost::asio::ip::tcp::socket socket, uint32_t rank, Limits limits,
                 TransportCounters& counters, LinkMeter& meter, ConnectionOwner& owner);

  uint32_t rank() const { return rank_; }

  /// Starts reading. Transport thread.
  void start();
  /// Queues `message` (non-empty) for writing: kUnavailable once closed, kResourceExhausted when
  /// the queue would exceed its cap. Any thread; never blocks on I/O.
  Status enqueue(Message message);
  /// Queues a probe of `bytes` (at most kMaxProbeBytes) if nothing else is queued: the peer
  /// times its arrival and drops it. False when not queued. Any thread.
  bool enqueue_probe(uint32_t bytes);
  /// When this side last finished writing a message the peer can time (epoch: never).
  LinkMeter::Clock::time_point last_measurable_send() const;
  /// The kernel's smoothed round-trip time of the connection, 0 if unknown. Transport thread.
  double rtt_seconds() const;
  /// Closes the socket and drops the queue; the first call reports to the owner. Transport
  /// thread (or any thread once that thread has stopped).
  void close(const std::string& reason);

 private:
  void read_length();
  void read_body(Length length);
  void write_next();
  void on_written(const boost::system::error_code& ec, uint64_t framed_bytes, bool probe);
  void fail(const boost::system::error_code& ec);

  boost::asio::ip::tcp::socket socket_;
  const uint32_t rank_;
  const Limits limits_;
  TransportCounters& counters_;
  ConnectionOwner& owner_;

  LinkMeter& meter_;

  struct Outgoing {
    Message message;
    uint32_t bytes = 0;  // of `message` written (a probe uses a prefix of a shared body)
    bool probe = false;
  };
  /// Queues `outgoing` and starts writing if nothing is being written. Under mutex_.
  void push_locked(Outgoing outgoing);

  LengthPrefix inbound_length_{};
  LinkMeter::Clock::time_point inbound_started_{};  // when the current message's prefix came
  MessageBytes inbound_;
  LengthPrefix outbound_length_{};

  mutable std::mutex mutex_;    // guards the members below
  std::deque<Outgoing> queue_;  // the front is being written while writing_
  LinkMeter::Clock::time_point last_measurable_send_{};
  uint64_t queued_bytes_ = 0;
  bool writing_ = false;
  bool closed_ = false;
};

}  // namespace gradgate::gateway::tcp
