// The live counters behind TransportStats: atomics, updated on the transport's thread and by
// send(), read by stats() from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "gateway/transport/transport.h"

namespace gradgate::gateway {

struct TransportCounters {
  std::atomic<uint64_t> messages_sent{0};
  std::atomic<uint64_t> messages_received{0};
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> bytes_received{0};
  std::atomic<uint64_t> connects{0};
  std::atomic<uint64_t> disconnects{0};
  std::atomic<uint64_t> rejected{0};
  std::atomic<uint64_t> foreign{0};
  std::atomic<uint64_t> probes_sent{0};
  std::atomic<uint64_t> probes_received{0};
  std::atomic<uint64_t> retransmits{0};
  std::atomic<uint64_t> reconnects{0};
  std::atomic<uint64_t> resent_messages{0};
  std::atomic<uint64_t> resent_bytes{0};
  std::array<std::atomic<uint64_t>, kPeerDownReasons> peers_down{};
  std::atomic<uint64_t> queued_bytes{0};
  std::atomic<uint32_t> peers_up{0};
  std::atomic<uint64_t> poll_cpu_nanoseconds{0};

  TransportStats snapshot() const {
    TransportStats stats;
    stats.messages_sent = messages_sent.load();
    stats.messages_received = messages_received.load();
    stats.bytes_sent = bytes_sent.load();
    stats.bytes_received = bytes_received.load();
    stats.connects = connects.load();
    stats.disconnects = disconnects.load();
    stats.rejected = rejected.load();
    stats.foreign = foreign.load();
    stats.probes_sent = probes_sent.load();
    stats.probes_received = probes_received.load();
    stats.retransmits = retransmits.load();
    stats.reconnects = reconnects.load();
    stats.resent_messages = resent_messages.load();
    stats.resent_bytes = resent_bytes.load();
    for (std::size_t reason = 0; reason < kPeerDownReasons; ++reason) {
      stats.peers_down[reason] = peers_down[reason].load();
    }
    stats.queued_bytes = queued_bytes.load();
    stats.peers_up = peers_up.load();
    stats.poll_cpu_seconds = static_cast<double>(poll_cpu_nanoseconds.load()) * 1e-9;
    return stats;
  }
};

}  // namespace gradgate::gateway
