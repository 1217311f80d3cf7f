// The abort messages of steps this gateway gave up on that could not go to a peer because it was
// not connected at that moment, kept until the peer is back. Without them a gateway whose link
// was down for a moment never learns that a step failed elsewhere and waits for it until
// collective.timeout_ms; with them it is told as soon as the link is up again.
//
// A message is kept for one collective timeout at most (by then the peer's step has ended
// anyway) and at most kMaxPerPeer per peer (the oldest go first), so a peer that never comes
// back costs a bounded amount of memory. Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "gateway/transport/transport.h"

namespace gradgate::gateway {

class PendingAborts {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxPerPeer = 256;

  /// For a job of `nodes` gateways; messages expire `keep_for` after they are held.
  PendingAborts(uint32_t nodes, std::chrono::milliseconds keep_for);

  /// Keeps `message` for `rank` (a rank out of range is ignored).
  void hold(uint32_t rank, Message message, Clock::time_point now = Clock::now());
  /// The messages kept for `rank` that have not expired, oldest first; none is kept any longer.
  std::vector<Message> take(uint32_t rank, Clock::time_point now = Clock::now());

 private:
  struct Held {
    Message message;
    Clock::time_point until;
  };
  const std::chrono::milliseconds keep_for_;
  std::mutex mutex_;
  std::vector<std::deque<Held>> held_;  // by rank
};

}  // namespace gradgate::gateway
