// The receiving half of a reliable stream from one peer: takes the peer's DATA packets in any
// order, delivers whole messages in sequence order exactly once, and says when to acknowledge
// and what. Nothing here does I/O or reads a clock: the caller passes the time.
//
// - Sequences below the cumulative ack, or already held, are duplicates: counted, dropped and
//   acknowledged at once (the peer missed an ACK). Sequences past the window's right edge are
//   dropped and counted. The others are kept; a packet above a gap is held and acknowledged at
//   once (with SACK ranges, the lowest kMaxSackRanges).
// - In-order packets are acknowledged after every `ack_every_packets` or `ack_delay` after the
//   first one not yet acknowledged, whichever comes first.
// - Flow control: the right edge is the cumulative ack plus `receive_window_packets` less the
//   packets of delivered messages the caller has not taken. It never moves back (a packet sent
//   inside an advertised window is never refused), and taking messages moves it on; an ACK goes
//   out at once when a window advertised as closed opens again.
// - Reassembly: fragments of a message have consecutive sequences, the same message id and
//   count, indices from 0, and all but the last carry the same number of bytes; message ids
//   increase by one. A packet that breaks this is a protocol error: on_data returns
//   kMalformedFrame, which sticks (the stream cannot be trusted any more).
//
// Ownership: payloads are copied (into the message's one contiguous buffer when in order, into
// a held fragment otherwise); a taken message belongs to the caller. Not thread-safe: one owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gateway/transport/reliable/config.h"
#include "gateway/transport/reliable/packet.h"
#include "gateway/transport/transport.h"

namespace gradgate::gateway::reliable {

struct ReceivedMessage {
  uint64_t id = 0;
  MessageBytes bytes;
};

struct ReceiverCounters {
  uint64_t packets_received = 0;  // DATA packets, duplicates included
  uint64_t duplicates = 0;
  uint64_t out_of_order = 0;   // held above a gap
  uint64_t beyond_window = 0;  // dropped: past the right edge
  uint64_t acks_sent = 0;
  uint64_t messages_delivered = 0;
  uint64_t bytes_delivered = 0;
};

class PeerReceiver {
 public:
  /// `config` must pass check().
  PeerReceiver(const Config& config, uint32_t peer_rank);

  /// Takes one DATA packet (as decode_packet accepts it). kMalformedFrame for a fragment that
  /// does not fit the message it continues, and for every packet after that.
  Status on_data(const DataFields& fields, std::span<const std::byte> payload,
                 Clock::time_point now);
  /// The next whole message, in order; nothing when none is complete.
  std::optional<ReceivedMessage> take_message();

  bool ack_due(Clock::time_point now) const;
  /// When an ACK falls due: Clock::time_point::min() when it is due now; nothing when no packet
  /// waits for one.
  std::optional<Clock::time_point> next_ack_time() const;
  /// The ACK to send now, if one is due.
  std::optional<AckFields> take_ack(Clock::time_point now);
  /// Makes an ACK due now.
  void request_ack() { ack_now_ = true; }

  uint64_t cumulative() const { return expected_; }
  uint32_t window() const { return static_cast<uint32_t>(right_edge_ - expected_); }
  std::size_t ready_messages() const { return ready_.size(); }
  /// Ok, or the protocol error that stopped the stream.
  const Status& failure() const { return failure_; }
  const ReceiverCounters& counters() const { return counters_; }

 private:
  struct HeldFragment {
    DataFields fields;
    std::vector<std::byte> payload;
  };
  struct Assembly {
    uint64_t message_id = 0;
    uint32_t fragments = 0;
    uint32_t next_fragment = 0;
    std::size_t fragment_bytes = 0;
    MessageBytes bytes;
  };
  struct ReadyMessage {
    ReceivedMessage message;
    uint32_t fragments = 0;
  };

  Status append(const DataFields& fields, std::span<const std::byte> payload);
  Status start_message(const DataFields& fields, std::span<const std::byte> payload);
  Status protocol_error(const std::string& what);
  void advance_right_edge();

  Config config_;
  uint32_t peer_rank_;
  uint64_t expected_ = 0;  // the cumulative ack: every sequence below it was taken in order
  uint64_t right_edge_;    // sequences at or past it are refused
  std::map<uint64_t, HeldFragment> held_;  // above a gap, by sequence
  std::optional<Assembly> assembly_;       // the message the next in-order fragment continues
  uint64_t next_message_id_ = 0;
  std::deque<ReadyMessage> ready_;
  uint64_t ready_fragments_ = 0;
  bool ack_now_ = false;
  uint32_t unacknowledged_ = 0;  // in-order packets since the last ACK
  std::optional<Clock::time_point> first_unacknowledged_;
  uint32_t advertised_window_;
  Status failure_;
  ReceiverCounters counters_;
};

}  // namespace gradgate::gateway::reliable
