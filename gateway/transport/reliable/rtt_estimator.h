// The retransmission timeout of one peer, from round-trip samples as in RFC 6298: the first
// sample R sets SRTT = R and RTTVAR = R/2, later ones RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R| and
// SRTT = 7/8 SRTT + 1/8 R; RTO = SRTT + 4 RTTVAR. A timeout doubles the RTO (back_off) until the
// next sample. The RTO always stays in [min_rto, max_rto] (min_rto stands for the clock
// granularity G of the RFC and keeps delayed ACKs from looking like losses).
//
// The caller feeds only samples of packets sent once (Karn's rule). Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>

#include "gateway/transport/reliable/config.h"

namespace gradgate::gateway::reliable {

class RttEstimator {
 public:
  explicit RttEstimator(const Config& config);

  void add_sample(Clock::duration rtt);
  /// After a retransmission timeout: the RTO doubles, up to max_rto.
  void back_off();

  Clock::duration rto() const { return rto_; }
  /// Not set before the first sample.
  std::optional<Clock::duration> smoothed() const { return srtt_; }
  Clock::duration variation() const { return rttvar_; }
  uint64_t samples() const { return samples_; }

 private:
  Clock::duration clamp(Clock::duration rto) const;

  Clock::duration min_rto_;
  Clock::duration max_rto_;
  Clock::duration rto_;
  std::optional<Clock::duration> srtt_;
  Clock::duration rttvar_{};
  uint64_t samples_ = 0;
};

}  // namespace gradgate::gateway::reliable
