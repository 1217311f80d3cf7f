// What the transport knows of the link from one peer to this gateway, measured on the messages
// that arrive over it: each message of at least kMinMeasuredBytes gives a goodput sample (its
// bytes over the time from its first to its last byte), and the estimate is the median of the
// last kSamples (a sample taken while the receiving thread lagged, or squeezed by a competing
// transfer, does not move it). Probes (wire.h) give samples when the link carries only small
// messages or none. The round-trip time is the kernel's smoothed estimate for the connection.
//
// Thread-safe: the transport's thread adds samples, anyone reads the estimate.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "gateway/transport/transport.h"

namespace gradgate::gateway {

class LinkMeter {
 public:
  using Clock = std::chrono::steady_clock;
  /// Messages smaller than this take too little time on a fast link to be timed.
  static constexpr uint64_t kMinMeasuredBytes = 256 * 1024;
  static constexpr size_t kSamples = 5;

  /// A message of `bytes` whose first byte arrived at `first` and last at `last`.
  void add_transfer(uint64_t bytes, Clock::time_point first, Clock::time_point last);
  void set_rtt(double seconds);

  /// `peer`'s link as measured by `now`.
  LinkEstimate estimate(uint32_t peer, Clock::time_point now) const;

 private:
  mutable std::mutex mutex_;
  std::array<double, kSamples> samples_{};
  size_t count_ = 0;  // samples taken in all; the last min(count_, kSamples) are in samples_
  Clock::time_point last_sample_{};
  double rtt_seconds_ = 0.0;
};

}  // namespace gradgate::gateway
