// Exponential backoff for redialing a peer: the delay starts at `min`, doubles after every
// failed attempt up to `max`, and goes back to `min` once a connection is established.
#pragma once

#include <algorithm>
#include <chrono>

namespace gradgate::gateway::tcp {

class Backoff {
 public:
  Backoff(std::chrono::milliseconds min, std::chrono::milliseconds max)
      : min_(min), max_(std::max(min, max)), next_(min) {}

  /// The delay to wait now; the one after it is twice as long (at most `max`).
  std::chrono::milliseconds next() {
    const auto delay = next_;
    next_ = std::min(max_, next_ * 2);
    return delay;
  }
  void reset() { next_ = min_; }

 private:
  std::chrono::milliseconds min_;
  std::chrono::milliseconds max_;
  std::chrono::milliseconds next_;
};

}  // namespace gradgate::gateway::tcp
