// The knobs of the reliability layer that turns a peer's datagrams into a reliable, ordered
// message stream (see session.h), with defaults for a DPDK port with a 1500-byte MTU inside a
// data centre. Both sides of a session are expected to use the same configuration: a sender
// assumes the peer's receive window is `receive_window_packets` until the first ACK says
// otherwise.
//
// Plain data; check() says which knob is unusable. Times are given by the caller as
// steady_clock time points (Clock below), so the whole layer runs on a simulated clock in tests.
#pragma once

#include <chrono>
#include <cstdint>

#include "gradgate/base/status.h"

namespace gradgate::gateway::reliable {

using Clock = std::chrono::steady_clock;

struct Config {
  /// Message bytes per DATA packet: 1400 makes a 1472-byte datagram, 1500 with IPv4 and UDP.
  uint32_t payload_bytes = 1400;
  /// Sender: the most packets in flight (sent, not acknowledged) at any time.
  uint32_t window_packets = 1024;
  /// Receiver: sequence numbers accepted past the cumulative ack, less the packets of delivered
  /// messages the caller has not taken yet (flow control).
  uint32_t receive_window_packets = 1024;
  /// Retransmission timeout before the first RTT sample, and its bounds (RFC 6298).
  std::chrono::microseconds initial_rto{200'000};
  std::chrono::microseconds min_rto{5'000};
  std::chrono::microseconds max_rto{2'000'000};
  /// Receiver: an ACK after this many in-order packets, or this long after the first one
  /// unacknowledged, whichever comes first (out-of-order arrivals are acknowledged at once).
  uint32_t ack_every_packets = 8;
  std::chrono::microseconds ack_delay{200};
  /// A message not fully acknowledged this long after it was queued fails, and the peer is lost.
  std::chrono::milliseconds message_deadline{30'000};
  /// No packet from the peer for this long while data is outstanding: the peer is lost. At least
  /// twice max_rto, so that retransmissions at the largest RTO get answers in time.
  std::chrono::milliseconds peer_timeout{10'000};
  /// Bytes of messages queued or in flight to one peer; beyond it send() is refused.
  uint64_t max_queued_bytes = 512ull << 20;
  /// The largest message, in bytes; at most max_queued_bytes.
  uint64_t max_message_bytes = 256ull << 20;
};

/// kInvalidArgument naming the first unusable knob.
Status check(const Config& config);

}  // namespace gradgate::gateway::reliable
