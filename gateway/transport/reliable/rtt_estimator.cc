#include "gateway/transport/reliable/rtt_estimator.h"

#include <algorithm>

namespace gradgate::gateway::reliable {

RttEstimator::RttEstimator(const Config& config)
    : min_rto_(config.min_rto), max_rto_(config.max_rto), rto_(clamp(config.initial_rto)) {}

void RttEstimator::add_sample(Clock::duration rtt) {
  rtt = std::max(rtt, Clock::duration::zero());
  if (!srtt_) {
    srtt_ = rtt;
    rttvar_ = rtt / 2;
  } else {
    const Clock::duration deviation = *srtt_ > rtt ? *srtt_ - rtt : rtt - *srtt_;
    rttvar_ = (3 * rttvar_ + deviation) / 4;
    srtt_ = (7 * *srtt_ + rtt) / 8;
  }
  ++samples_;
  rto_ = clamp(*srtt_ + 4 * rttvar_);
}

void RttEstimator::back_off() { rto_ = clamp(2 * rto_); }

Clock::duration RttEstimator::clamp(Clock::duration rto) const {
  return std::clamp(rto, min_rto_, max_rto_);
}

}  // namespace gradgate::gateway::reliable
