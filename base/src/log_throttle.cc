#include "gradgate/base/log_throttle.h"

namespace gradgate {

std::optional<uint64_t> LogThrottle::admit(uint64_t key, Clock::time_point now) {
  auto [it, inserted] = entries_.try_emplace(key, Entry{now, 0});
  if (inserted) return 0;
  Entry& entry = it->second;
  if (now - entry.last < interval_) {
    ++entry.suppressed;
    return std::nullopt;
  }
  const uint64_t suppressed = entry.suppressed;
  entry = Entry{now, 0};
  return suppressed;
}

}  // namespace gradgate
