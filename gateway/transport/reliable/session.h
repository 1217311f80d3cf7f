// One reliable, ordered message stream each way between this gateway and one peer, over
// datagrams that may be lost, duplicated or reordered: a PeerSender and a PeerReceiver tied to
// the two sides' session epochs, with the rule that says when the peer is lost.
//
// The caller (a datagram transport) owns the I/O and the clock: it feeds every datagram from the
// peer to on_datagram(), sends what poll() and take_ack() return (encoded with encode() into its
// own buffers), takes delivered messages with take_message(), and calls poll() again by
// next_timer() at the latest.
//
// Epochs: each session starts with a random, non-zero local epoch; packets carry the sender's
// epoch and the receiver's as the sender knows it (0 before the first packet from it).
// - A packet from a new peer epoch means the peer restarted: both directions start over (the
//   messages still queued to it are dropped and counted, sequences and message ids restart at
//   0) and take_peer_restarted() says so once. Packets of the epochs it replaced are dropped.
// - A packet for another local epoch is for an earlier session of this gateway: dropped, and a
//   DATA packet is answered with an ACK so that the peer learns the new epoch (and starts over).
// Lost: a message not acknowledged by its deadline (kTimeout), no packet from the peer for
// `peer_timeout` while data is outstanding (kUnavailable), or a protocol error in the peer's
// stream (kMalformedFrame). A lost session stops; status() says why. The caller treats the peer
// as down and starts a new Session, with a new epoch, to reach it again.
//
// Not thread-safe: one owner thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "gateway/transport/reliable/config.h"
#include "gateway/transport/reliable/packet.h"
#include "gateway/transport/reliable/receiver.h"
#include "gateway/transport/reliable/sender.h"

namespace gradgate::gateway::reliable {

struct SessionAddress {
  uint64_t job_id = 0;
  uint32_t local_rank = 0;
  uint32_t peer_rank = 0;
  uint64_t local_epoch = 0;  // random, not 0, new for every session
};

struct SessionCounters {
  uint64_t malformed = 0;         // refused by decode_packet
  uint64_t foreign = 0;           // another job, or not from the peer to this rank
  uint64_t stale = 0;             // from or for an epoch that was replaced
  uint64_t peer_restarts = 0;     // new peer epochs after the first
  uint64_t messages_aborted = 0;  // queued to a peer that restarted, dropped
};

class Session {
 public:
  /// `config` must pass check().
  Session(const Config& config, const SessionAddress& address);

  /// Queues `message` for the peer and returns its id (PeerSender::enqueue); kUnavailable once
  /// the session is lost.
  Result<uint64_t> send(Message message, Clock::time_point now);
  /// Takes one datagram that arrived from the network. Refused with the state unchanged:
  /// kMalformedFrame or kChecksumMismatch for bytes decode_packet refuses, kIncompatible for
  /// another job or other ranks, kMalformedFrame for an ACK of sequences never sent. A DATA
  /// packet that breaks the peer's stream (receiver.h) loses the session; once lost, every
  /// datagram gets the error that lost it.
  Status on_datagram(std::span<const std::byte> datagram, Clock::time_point now);
  /// The DATA packets to transmit now.
  std::vector<OutgoingData> poll(Clock::time_point now);
  /// The ACK to transmit now, if one is due.
  std::optional<AckFields> take_ack(Clock::time_point now);
  /// Encode into `out` (at least data_packet_bytes(length) / kMaxAckBytes): see packet.h.
  Result<std::size_t> encode(const OutgoingData& data, std::span<std::byte> out) const;
  Result<std::size_t> encode(const AckFields& ack, std::span<std::byte> out) const;
  /// The next message from the peer, in order.
  std::optional<ReceivedMessage> take_message() { return receiver_.take_message(); }

  /// When poll() or take_ack() have work next (Clock::time_point::min(): now); nothing when
  /// idle or lost.
  std::optional<Clock::time_point> next_timer() const;
  /// Ok while the peer is up; why it was lost afterwards.
  const Status& status() const { return status_; }
  /// True once after each peer restart.
  bool take_peer_restarted() { return std::exchange(peer_restarted_, false); }
  /// 0 until the first packet from the peer.
  uint64_t peer_epoch() const { return peer_epoch_; }
  const SessionAddress& address() const { return address_; }
  const PeerSender& sender() const { return sender_; }
  const PeerReceiver& receiver() const { return receiver_; }
  const SessionCounters& counters() const { return counters_; }

 private:
  PacketHeader header() const;
  Status check_addressed_to_us(const PacketHeader& header) const;
  /// The peer restarted: both directions start over.
  void start_over();
  /// From when silence counts against the peer; nothing when no data is outstanding.
  std::optional<Clock::time_point> quiet_since() const;

  Config config_;
  SessionAddress address_;
  PeerSender sender_;
  PeerReceiver receiver_;
  uint64_t peer_epoch_ = 0;
  std::deque<uint64_t> replaced_epochs_;  // the last few peer epochs, newest last
  std::optional<Clock::time_point> last_heard_;
  bool peer_restarted_ = false;
  Status status_;
  SessionCounters counters_;
};

}  // namespace gradgate::gateway::reliable
