// The abort messages this gateway sent in the last collective timeout, kept per peer and sent
// again each time the peer's link comes up. An abort can miss a peer in two ways: the link is
// down when it is sent, or it is queued on a link that then drops and takes its queue along.
// Either way the peer would never learn that the step failed here and would wait for it until
// collective.timeout_ms; sent again when the link is back, it reaches the peer at once. A peer
// that gets an abort twice keeps the first (the mailbox files one per step and sender, and counts
// one for a finished step as late).
//
// A message is kept for one collective timeout (by then the peer's step has ended anyway) and at
// most kMaxPerPeer per peer (the oldest go first), so a peer that never comes back costs a
// bounded amount of memory. Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "gateway/transport/transport.h"

namespace gradgate::gateway {

class RecentAborts {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxPerPeer = 256;

  /// For a job of `nodes` gateways; messages expire `keep_for` after they are kept.
  RecentAborts(uint32_t nodes, std::chrono::milliseconds keep_for);

  /// Keeps `message` for `rank` (a rank out of range is ignored).
  void keep(uint32_t rank, Message message, Clock::time_point now = Clock::now());
  /// The messages kept for `rank` that have not expired, oldest first; they stay kept until they
  /// expire.
  std::vector<Message> kept(uint32_t rank, Clock::time_point now = Clock::now());

 private:
  struct Kept {
    Message message;
    Clock::time_point until;
  };
  /// Drops `rank`'s expired messages.
  void expire_locked(std::deque<Kept>& kept, Clock::time_point now);

  const std::chrono::milliseconds keep_for_;
  std::mutex mutex_;
  std::vector<std::deque<Kept>> kept_;  // by rank, oldest first
};

}  // namespace gradgate::gateway
