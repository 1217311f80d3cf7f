#include "gateway/transport/link_meter.h"

#include <algorithm>
#include <vector>

namespace gradgate::gateway {

void LinkMeter::add_transfer(uint64_t bytes, Clock::time_point first, Clock::time_point last) {
  const double seconds = std::chrono::duration<double>(last - first).count();
  if (bytes < kMinMeasuredBytes || seconds <= 0.0) return;
  std::lock_guard lock(mutex_);
  samples_[count_ % kSamples] = static_cast<double>(bytes) / seconds;
  ++count_;
  last_sample_ = last;
}

void LinkMeter::set_rtt(double seconds) {
  std::lock_guard lock(mutex_);
  rtt_seconds_ = seconds;
}

LinkEstimate LinkMeter::estimate(uint32_t peer, Clock::time_point now) const {
  std::lock_guard lock(mutex_);
  LinkEstimate link;
  link.peer = peer;
  link.rtt_seconds = rtt_seconds_;
  link.samples = count_;
  if (count_ == 0) return link;
  const size_t held = std::min(count_, kSamples);
  std::vector<double> held_samples(samples_.begin(),
                                   samples_.begin() + static_cast<std::ptrdiff_t>(held));
  const auto median = held_samples.begin() + static_cast<std::ptrdiff_t>(held / 2);
  std::nth_element(held_samples.begin(), median, held_samples.end());
  link.goodput_bytes_per_second = *median;
  link.age_seconds = std::chrono::duration<double>(now - last_sample_).count();
  return link;
}

}  // namespace gradgate::gateway
