// The candidate threshold of top-k selection, steered alike by the CPU and the CUDA codecs
// (kernels/cpu/topk_select.h, kernels/cuda/topk_selection.h): the Laplace estimate of a cold step,
// the read-only rescans that bring the candidate count into [k, cap], and the warm start from one
// step to the next. Both selections scan at the thresholds chosen here, so from the same values
// they gather the same candidates; in threshold mode, where those are at most 1.1 k, they select
// the same elements.
//
// The count model: count(t), the elements with |v| > t, falls about exponentially in t, as for
// Laplace |v| of mean b (count(t) = n exp(-t / b)). Every scan adds a point of it, and (0, n) is
// one from the start: at t = 0 at most every element counts.
//
// Plain C++ for the host code of either compiler: pure functions and plain values, no allocation.
// A ScanSteering serves one selection, a WarmStart one stream; neither is shared between threads.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>

namespace gradgate::kernels::topk {

/// The most candidates a selection of k of n elements lists: 8 k + 1024, at most n.
inline size_t candidate_capacity(size_t n, size_t k) { return std::min(n, 8 * k + 1024); }

/// The candidate count a candidate threshold aims at, in multiples of k: fewer candidates make the
/// final cut cheaper, too few force a rescan of the whole array.
inline constexpr double kCandidateFactor = 1.5;

/// A threshold expected to leave `target` of n elements above it, for Laplace |v| of mean b.
inline float laplace_threshold(double b, size_t n, double target) {
  const double ratio = static_cast<double>(n) / std::max(target, 1.0);
  return ratio <= 1.0 ? 0.0f : static_cast<float>(b * std::log(ratio));
}

/// Steers the read-only rescans of one selection until the candidate count is in [k, cap]: the
/// next threshold is where the log-linear count model through the closest thresholds seen with too
/// many candidates (at first (0, n)) and too few reaches kCandidateFactor * k.
class ScanSteering {
 public:
  /// The most rescans of one selection.
  static constexpr int kMaxScans = 40;

  /// A selection of k of n elements into at most cap candidates; b is the mean |v|.
  ScanSteering(size_t n, size_t k, size_t cap, double b)
      : k_(k), cap_(cap), b_(b), c_many_(static_cast<double>(n)) {}

  bool in_window(size_t count) const { return count >= k_ && count <= cap_; }

  /// After a scan at t found `count` (outside the window): the threshold to scan at next, or
  /// nothing when none can do better (fewer than k non-zero elements, ties, or scans used up).
  std::optional<float> next(float t, size_t count) {
    if (++scans_ > kMaxScans) return std::nullopt;
    if (count < k_ && t <= 0.0f) return std::nullopt;
    const double target = kCandidateFactor * static_cast<double>(k_);
    if (count > cap_) {
      too_many_ = t;
      c_many_ = static_cast<double>(count);
    } else {
      too_few_ = t;
      c_few_ = static_cast<double>(count);
    }
    double next;
    if (std::isfinite(too_few_) && c_few_ > 0) {
      next = log_linear(too_many_, c_many_, too_few_, c_few_, target);
    } else if (std::isfinite(too_few_)) {
      next = 0.5 * (too_many_ + too_few_);
    } else {
      next = t + std::max(b_, 1e-30) * std::log(static_cast<double>(count) / target);
    }
    if (!(next > too_many_ && next < too_few_)) {
      next = std::isfinite(too_few_) ? 0.5 * (too_many_ + too_few_) : 2.0 * t + b_;
    }
    const auto next_float = static_cast<float>(next);
    if (!(next_float > static_cast<float>(too_many_) && next_float < too_few_)) return std::nullopt;
    return next_float;
  }

  /// After the last scan (at t, `count` candidates): whether the candidates cannot make the
  /// selection, being too many, or fewer than k with non-zero elements left out (ties, or the
  /// scans used up). The k largest |v| of the whole array are then selected instead.
  bool needs_whole_array(float t, size_t count) const {
    return count > cap_ || (count < k_ && t > 0.0f);
  }

 private:
  // Where a log-linear count model through (t0, c0) and (t1, c1) reaches `target`; the midpoint
  // when the points cannot define a slope.
  static double log_linear(double t0, double c0, double t1, double c1, double target) {
    if (c0 <= 0 || c1 <= 0 || c0 == c1 || t0 == t1) return 0.5 * (t0 + t1);
    const double slope = (t1 - t0) / std::log(c0 / c1);  // the Laplace scale between the points
    return t0 + slope * std::log(c0 / target);
  }

  size_t k_, cap_;
  double b_;
  int scans_ = 0;
  double too_many_ = 0.0, c_many_;  // a threshold with more than cap candidates
  double too_few_ = std::numeric_limits<double>::infinity(), c_few_ = 0.0;  // one with fewer than k
};

/// The warm start of one stream: the last final threshold, its drift and a safety margin, from
/// which the next step's first pass collects its candidates without a rescan.
struct WarmStart {
  float threshold = 0.0f;     // the last final threshold; 0: cold
  float drift = 0.0f;         // its last change, extrapolated into the next step
  float drift_change = 0.0f;  // how much that change varies (decaying max): a safety margin
  float margin = 0.0f;        // how far below the prediction the candidate threshold goes

  bool warm() const { return threshold > 0.0f; }

  /// The threshold of the first pass: the prediction less the margins, or +inf when cold (the
  /// first pass then collects nothing).
  float candidate_threshold() const {
    return warm() ? std::max(0.0f, threshold + drift - margin - drift_change)
                  : std::numeric_limits<float>::infinity();
  }

  /// After a selection of `selected` of `candidates` (all above t_scan) at the final `final_t`,
  /// with `was_warm` this step's warmth and b the mean |v|: aims the next candidate threshold at
  /// kCandidateFactor times the selection, from the local slope of log(count). A final_t of 0
  /// leaves the state as it is.
  void update(float final_t, float t_scan, size_t candidates, size_t selected, double b,
              bool was_warm) {
    if (!(final_t > 0.0f)) return;
    double slope = b;
    if (candidates > selected && selected > 0 && final_t > t_scan) {
      slope = (final_t - t_scan) / std::log(static_cast<double>(candidates) / selected);
    }
    // A change of more than a quarter of the threshold is a jump (new data), not a trend.
    const float change = was_warm ? final_t - threshold : 0.0f;
    const float next_drift = std::fabs(change) <= 0.25f * final_t ? change : 0.0f;
    drift_change =
        next_drift == 0.0f ? 0.0f : std::max(std::fabs(next_drift - drift), 0.5f * drift_change);
    drift = next_drift;
    threshold = final_t;
    margin = static_cast<float>(
        std::clamp(slope * std::log(kCandidateFactor), 0.01 * final_t, 1.0 * final_t));
  }
};

}  // namespace gradgate::kernels::topk
