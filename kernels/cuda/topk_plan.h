// The host-side decisions of the CUDA top-k selection, kept apart from the kernels so that they
// run and are tested on the CPU: the order of the elements and the bins of the radix select among
// the candidates. The candidate threshold (the Laplace estimate, the rescans' steering and the warm
// start from one step to the next) is steered as on the CPU, by gradgate/kernels/topk_steering.h.
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
#include <cstddef>
#include <cstdint>

#include "gradgate/kernels/half.h"
#include "gradgate/kernels/topk_steering.h"

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

// The candidate threshold is steered as by the CPU codec.
using kernels::topk::candidate_capacity;
using kernels::topk::kCandidateFactor;
using kernels::topk::laplace_threshold;
using kernels::topk::ScanSteering;
using kernels::topk::WarmStart;

}  // namespace gradgate::kernels::cuda::topk
