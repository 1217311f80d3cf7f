// Rate limit for repeated log lines (a flapping peer, a flood of bad frames): at most one line
// per key and interval; the admitted line reports how many were dropped since the last one.
// Not thread-safe: each user keeps its own, on its own thread (the transport's, the ingress's).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <unordered_map>

namespace gradgate {

class LogThrottle {
 public:
  using Clock = std::chrono::steady_clock;

  explicit LogThrottle(Clock::duration interval = std::chrono::seconds(1)) : interval_(interval) {}

  /// The number of lines suppressed for `key` since the last admitted one, or nullopt when
  /// this line must be suppressed too.
  std::optional<uint64_t> admit(uint64_t key, Clock::time_point now = Clock::now());

 private:
  struct Entry {
    Clock::time_point last;
    uint64_t suppressed = 0;
  };
  Clock::duration interval_;
  std::unordered_map<uint64_t, Entry> entries_;
};

}  // namespace gradgate
