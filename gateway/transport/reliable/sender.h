// The sending half of a reliable stream to one peer. Messages are queued whole, cut into
// fragments of `payload_bytes` and numbered with consecutive sequence numbers (and message ids,
// both from 0 in each session). poll() says which DATA packets to put on the wire now; on_ack()
// takes the peer's ACKs. Nothing here does I/O or reads a clock: the caller passes the time.
//
// - Window: a new packet leaves while fewer than `window_packets` are in flight and its sequence
//   is below the peer's cumulative ack plus its advertised window (the right edge, as in TCP; so
//   in flight <= min(window_packets, advertised window)). When the peer's window is closed and
//   nothing is in flight, one packet goes out anyway: its retransmissions probe the window.
// - Retransmission: a packet not acknowledged (cumulatively or by SACK) one RTO after it was last
//   sent is sent again, and the RTO doubles (rtt_estimator.h). A packet that SACKs show three
//   later packets passed is sent again at once (fast retransmit, once per packet). Round-trip
//   samples come only from packets sent once (Karn's rule).
// - Deadline: a message not cumulatively acknowledged `message_deadline` after it was queued
//   fails (kTimeout): failure() names it, every queued message is dropped and the sender stops,
//   like a reset TCP connection. The caller treats the peer as down.
//
// Ownership: the sender holds each Message until the peer acknowledges all of it; an
// OutgoingData holds its Message too, so its payload stays valid. Not thread-safe: one owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

#include "gateway/transport/reliable/config.h"
#include "gateway/transport/reliable/packet.h"
#include "gateway/transport/reliable/rtt_estimator.h"
#include "gateway/transport/transport.h"

namespace gradgate::gateway::reliable {

/// One DATA packet to transmit: its fields and where its payload lies in the message.
struct OutgoingData {
  DataFields fields;
  Message message;
  std::size_t offset = 0;
  std::size_t length = 0;

  std::span<const std::byte> payload() const { return {message->data() + offset, length}; }
};

struct SendFailure {
  uint64_t message_id = 0;
  Status status;
};

struct SenderCounters {
  uint64_t packets_sent = 0;  // DATA packets, retransmissions included
  uint64_t retransmits_timeout = 0;
  uint64_t retransmits_fast = 0;
  uint64_t acks_received = 0;
  uint64_t bytes_sent = 0;  // payload bytes, retransmissions included
  uint64_t messages_acknowledged = 0;
  uint64_t in_flight = 0;     // gauge: packets sent and not acknowledged
  uint64_t queued_bytes = 0;  // gauge: bytes of messages not fully acknowledged
};

class PeerSender {
 public:
  /// `config` must pass check().
  PeerSender(const Config& config, uint32_t peer_rank);

  /// Queues `message` (1..max_message_bytes bytes) and returns its id. kInvalidArgument for an
  /// empty or oversized message, kResourceExhausted when the queue would pass max_queued_bytes,
  /// kUnavailable after a failure.
  Result<uint64_t> enqueue(Message message, Clock::time_point now);
  /// The DATA packets to transmit now: timed-out and fast retransmissions, then new packets.
  std::vector<OutgoingData> poll(Clock::time_point now);
  /// Frees what `ack` (as decode_packet accepts it) acknowledges, takes an RTT sample, updates
  /// the peer's window. An ACK older than one already taken is ignored. kMalformedFrame (state
  /// unchanged) for an ACK of sequence numbers never sent.
  Status on_ack(const AckFields& ack, Clock::time_point now);

  /// When poll() has work next: a retransmission timer or a deadline; Clock::time_point::min()
  /// when packets can leave now; nothing when idle or failed.
  std::optional<Clock::time_point> next_timer() const;
  /// Since when packets have been in flight without a pause; nothing when none are.
  std::optional<Clock::time_point> outstanding_since() const { return outstanding_since_; }
  const std::optional<SendFailure>& failure() const { return failure_; }
  /// Messages queued or in flight.
  std::size_t pending_messages() const { return messages_.size(); }
  uint32_t peer_window() const { return peer_window_; }
  const RttEstimator& rtt() const { return rtt_; }
  SenderCounters counters() const;

 private:
  struct PendingMessage {
    uint64_t id = 0;
    Message bytes;
    uint64_t first_sequence = 0;
    uint32_t fragments = 0;
    Clock::time_point deadline;
  };
  struct SentPacket {
    DataFields fields;
    Clock::time_point last_sent;
    uint32_t transmissions = 1;
    bool acknowledged = false;  // by SACK until the cumulative ack passes it
    bool lost = false;          // SACKs passed it: fast retransmit due
    bool fast_retransmitted = false;
  };

  bool can_send_new() const;
  void send_new(Clock::time_point now, std::vector<OutgoingData>& out);
  void retransmit_expired(Clock::time_point now, std::vector<OutgoingData>& out);
  void retransmit_lost(Clock::time_point now, std::vector<OutgoingData>& out);
  void retransmit(SentPacket& packet, Clock::time_point now, std::vector<OutgoingData>& out);
  OutgoingData outgoing(const DataFields& fields);
  void mark_lost();
  void release_acknowledged_messages();
  void fail_front_message();

  Config config_;
  uint32_t peer_rank_;
  RttEstimator rtt_;
  std::deque<PendingMessage> messages_;  // by id; the front is the oldest not acknowledged
  std::deque<SentPacket> sent_;          // sequences [cumulative_, next_send_)
  uint64_t cumulative_ = 0;              // the peer's cumulative ack
  uint64_t next_send_ = 0;               // the first sequence never sent
  uint64_t next_sequence_ = 0;           // the first sequence not given to a message
  uint64_t next_message_id_ = 0;
  uint64_t send_message_id_ = 0;  // the message of next_send_, and its fragment
  uint32_t send_fragment_ = 0;
  uint32_t peer_window_;
  uint64_t in_flight_ = 0;  // sent and not acknowledged
  uint64_t lost_ = 0;       // marked for fast retransmit
  uint64_t queued_bytes_ = 0;
  Clock::time_point earliest_sent_;  // at most the oldest last_sent of the packets in flight
  std::optional<Clock::time_point> outstanding_since_;
  std::optional<SendFailure> failure_;
  SenderCounters counters_;
};

}  // namespace gradgate::gateway::reliable
