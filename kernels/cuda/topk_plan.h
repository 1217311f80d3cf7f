// The host-side decisions of the CUDA top-k selection, kept apart from the kernels so that they
// run and are tested on the CPU: the order of the elements, the bins of the radix select among the
// candidates, the Laplace estimate and the correction of the candidate threshold, and the warm
// start from one step to the next (the rules of kernels/cpu/topk_select.h).
//
// Order: an element ranks by its order key, |v|'s bits above the complemented index, so that a
// larger key is a larger |v| or, for equal |v|, a lower index. Keys are distinct, so "the keys at
// or above a cut" is a selection of an exact size: exactly the k largest |v| with ties broken by
// lower index, the CPU codec's exact selection. The radix select finds such a cut from histograms
// of the keys in a shrinking range, kSelectBins bins at a time.
//
// Header-only and free of CUDA, pure functions and plain values: safe anywhere.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>

#include "gradgate/kernels/half.h"

namespace gradgate::kernels::cuda::topk {

/// The order key of value v at `index` (see above).
GRADGATE_HOST_DEVICE inline uint64_t order_key(float v, uint32_t index) {
  return static_cast<uint64_t>(float_bits(v) & 0x7FFFFFFFu) << 32 | (0xFFFFFFFFu - index);
}

/// The smallest key of any element with |v| > t (t finite and >= 0): |v|'s bits exceed t's.
GRADGATE_HOST_DEVICE inline uint64_t first_key_above(float t) {
  return (static_cast<uint64_t>(float_bits(t) & 0x7FFFFFFFu) + 1) << 32;
}

/// The |v| of a key.
GRADGATE_HOST_DEVICE inline float key_magnitude(uint64_t key) {
  return bits_float(static_cast<uint32_t>(key >> 32));
}

inline constexpr uint32_t kSelectBins = 4096;

/// Keys [lo, hi] in kSelectBins bins of 2^shift keys each, bin (key - lo) >> shift.
struct KeyRange {
  uint64_t lo = 0;
  uint64_t hi = 0;
  int shift = 0;

  GRADGATE_HOST_DEVICE bool holds(uint64_t key) const { return key >= lo && key <= hi; }
  GRADGATE_HOST_DEVICE uint32_t bin(uint64_t key) const {
    return static_cast<uint32_t>((key - lo) >> shift);
  }
};

/// The range [lo, hi] (lo <= hi) with the smallest bins that fit kSelectBins of them.
inline KeyRange key_range(uint64_t lo, uint64_t hi) {
  KeyRange range{lo, hi, 0};
  while (((hi - lo) >> range.shift) >= kSelectBins) ++range.shift;
  return range;
}

/// One step of the radix select: either the cut (keep the keys >= key: `selected` of them), or
/// the narrower range to histogram next, with the count of keys above it.
struct CutStep {
  bool done = false;
  uint64_t key = 0;
  size_t selected = 0;
  KeyRange next;
  size_t above = 0;
};

/// Looks for a cut at a bin edge of `range` that keeps between k and k_max keys, given the
/// histogram `bins` of the keys in the range and the count `above` of those above it. Where the
/// edge that first reaches k keeps more than k_max, the bin it opens is the next range. Where
/// even all the keys are fewer than k, the cut keeps them all (range.lo).
inline CutStep cut_step(const uint32_t* bins, const KeyRange& range, size_t above, size_t k,
                        size_t k_max) {
  for (uint32_t b = kSelectBins; b-- > 0;) {
    const size_t in_bin = bins[b];
    if (above + in_bin < k) {
      above += in_bin;
      continue;
    }
    const uint64_t lo = range.lo + (static_cast<uint64_t>(b) << range.shift);
    if (above + in_bin <= k_max) return {true, lo, above + in_bin, {}, 0};
    // More than k_max from one bin: it holds at least two distinct keys, so its span exceeds one.
    const uint64_t hi = std::min(range.hi, lo + ((uint64_t{1} << range.shift) - 1));
    return {false, 0, 0, key_range(lo, hi), above};
  }
  return {true, range.lo, above, {}, 0};
}

/// The k of a density over n elements and the most threshold mode keeps are the CPU codec's
/// (topk_count, topk_max_count); the candidate list holds at most this many.
inline size_t candidate_capacity(size_t n, size_t k) { return std::min(n, 8 * k + 1024); }

/// The candidate count a candidate threshold aims at, in multiples of k.
inline constexpr double kCandidateFactor = 1.5;

/// A threshold expected to leave `target` of n elements above it, for Laplace |v| of mean b.
inline float laplace_threshold(double b, size_t n, double target) {
  const double ratio = static_cast<double>(n) / std::max(target, 1.0);
  return ratio <= 1.0 ? 0.0f : static_cast<float>(b * std::log(ratio));
}

/// Steers read-only rescans until the candidate count is in [k, cap]: a log-linear model of
/// count(t) between the closest thresholds found with too many and too few candidates, aimed at
/// kCandidateFactor * k. b is the mean |v|.
class ScanSteering {
 public:
  static constexpr int kMaxScans = 40;

  ScanSteering(size_t k, size_t cap, double b) : k_(k), cap_(cap), b_(b) {}

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

 private:
  // Where a log-linear count model through (t0, c0) and (t1, c1) reaches `target`; the midpoint
  // when the points cannot define a slope.
  static double log_linear(double t0, double c0, double t1, double c1, double target) {
    if (c0 <= 0 || c1 <= 0 || c0 == c1 || t0 == t1) return 0.5 * (t0 + t1);
    const double slope = (t1 - t0) / std::log(c0 / c1);
    return t0 + slope * std::log(c0 / target);
  }

  size_t k_, cap_;
  double b_;
  int scans_ = 0;
  double too_many_ = 0.0, c_many_ = 0.0;  // a threshold with more than cap candidates
  double too_few_ = std::numeric_limits<double>::infinity(), c_few_ = 0.0;  // one with fewer than k
};

/// The warm start of one stream: the last final threshold, its drift and a safety margin.
struct WarmStart {
  float threshold = 0.0f;     // 0: cold
  float drift = 0.0f;         // the last change, extrapolated into the next step
  float drift_change = 0.0f;  // how much that change varies (decaying max)
  float margin = 0.0f;        // how far below the prediction the candidate threshold goes

  bool warm() const { return threshold > 0.0f; }

  /// The threshold of the first pass: the prediction less the margins, or +inf when cold (the
  /// first pass then collects nothing).
  float candidate_threshold() const {
    return warm() ? std::max(0.0f, threshold + drift - margin - drift_change)
                  : std::numeric_limits<float>::infinity();
  }

  /// After a selection of `selected` of `candidates` (all above t_scan) at the final `final_t`,
  /// with `was_warm` this step's warmth and b the mean |v|.
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

}  // namespace gradgate::kernels::cuda::topk
