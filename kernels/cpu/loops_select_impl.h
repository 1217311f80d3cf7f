// The selection loops of the LoopTable (loops_impl.h): |v| statistics, the accumulation of the
// residual and the threshold selection. Compiled once per instruction set inside namespace
// GRADGATE_ISA_NS; only to be included by loops_impl.h.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "gradgate/kernels/element_rules.h"
#include "loops.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace gradgate::kernels::cpu::GRADGATE_ISA_NS {
namespace {

using rules::finite;

// Float partial sums are flushed into a double every kBlock elements to keep the sum accurate (the
// order every implementation of the sum follows, see element_rules.h).
constexpr size_t kBlock = rules::kSumBlock;

// scan_select's element-by-element part from element `i` on, `count` selected so far: the whole
// array on the baseline, the tail after the vectors on AVX2.
size_t scan_select_from(const float* e, size_t i, size_t n, float t, uint32_t* idx, float* val,
                        size_t count, size_t cap) {
  for (; i < n; ++i) {
    if (std::fabs(e[i]) > t) {
      const size_t pos = std::min(count, cap);
      idx[pos] = static_cast<uint32_t>(i);
      val[pos] = e[i];
      ++count;
    }
  }
  return count;
}

#if defined(__AVX2__)
// Permutation that moves the lanes selected by an 8-bit mask to the front, for every mask.
struct CompactTable {
  alignas(32) uint32_t lanes[256][8];
  constexpr CompactTable() : lanes{} {
    for (int mask = 0; mask < 256; ++mask) {
      int out = 0;
      for (int lane = 0; lane < 8; ++lane) {
        if (mask & (1 << lane)) lanes[mask][out++] = static_cast<uint32_t>(lane);
      }
    }
  }
};
constexpr CompactTable kCompact;

// Appends the lanes of (index, value) selected by `mask` at position *pos (clamped to cap).
inline void compact_store(int mask, __m256i index, __m256 value, uint32_t* idx, float* val,
                          size_t& count, size_t cap) {
  const size_t pos = std::min(count, cap);
  const __m256i perm = _mm256_load_si256(reinterpret_cast<const __m256i*>(kCompact.lanes[mask]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(idx + pos),
                      _mm256_permutevar8x32_epi32(index, perm));
  _mm256_storeu_ps(val + pos, _mm256_permutevar8x32_ps(value, perm));
  count += static_cast<size_t>(__builtin_popcount(mask));
}

inline double horizontal_sum(__m256 v) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  double s = 0.0;
  for (float x : lanes) s += x;
  return s;
}

inline size_t horizontal_sum_epi32(__m256i v) {
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
  size_t s = 0;
  for (uint32_t x : lanes) s += x;
  return s;
}

inline float horizontal_max(__m256 v) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  float m = 0.0f;
  for (float x : lanes) m = std::max(m, x);
  return m;
}

// The pending fixes of a pass, taken in index order as the pass reaches them.
struct FixCursor {
  explicit FixCursor(const PendingFixes& pending)
      : fix(pending), next(pending.count ? pending.indices[0] : SIZE_MAX) {}

  // The fixes of the group at i as a vector (built in registers: a scalar store into e right
  // before the vector load of the same line would stall store forwarding), and their lanes.
  __m256 of_group(size_t i, __m256& lanes) {
    const __m256i lane_ids = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256 sum = _mm256_setzero_ps();
    lanes = _mm256_setzero_ps();
    while (next < i + 8) {
      const __m256 lane = _mm256_castsi256_ps(
          _mm256_cmpeq_epi32(lane_ids, _mm256_set1_epi32(static_cast<int>(next - i))));
      sum = _mm256_add_ps(sum, _mm256_and_ps(lane, _mm256_set1_ps(fix.values[f])));
      lanes = _mm256_or_ps(lanes, lane);
      advance();
    }
    return sum;
  }

  // Adds the fixes below n that are left to e, one at a time.
  void apply_rest(float* e, size_t n) {
    for (; next < n; advance()) e[next] += fix.values[f];
  }

  void advance() { next = ++f < fix.count ? fix.indices[f] : SIZE_MAX; }

  const PendingFixes& fix;
  size_t f = 0;  // the fix at `next`
  size_t next;   // its element; SIZE_MAX when none is left
};

// The elements [i, n) after the vector loop, one at a time: e += g, statistics, and (kCollect)
// collection of the elements above t, cleared while the last group still finds room.
template <bool kCollect>
void accumulate_tail(const float* g, float* e, size_t i, size_t n, float t, uint32_t* idx,
                     float* val, size_t cap, SelectResult& r) {
  const bool room = r.count + 8 <= cap;  // the tail is the last group
  for (; i < n; ++i) {
    const float v = g[i] + e[i];
    if (finite(v)) {
      e[i] = v;
    } else {
      ++r.stats.nonfinite;
    }
    const float a = std::fabs(e[i]);
    r.stats.abs_sum += a;
    r.stats.abs_max = std::max(r.stats.abs_max, a);
    if (kCollect && a > t) {
      const size_t pos = std::min(r.count, cap);
      idx[pos] = static_cast<uint32_t>(i);
      val[pos] = e[i];
      if (room) e[i] = 0.0f;
      ++r.count;
    }
  }
  if (kCollect && room) r.cleared = r.count;
}

// e += fix (element by element, just before the pass reaches them), e += g, statistics, and
// (kCollect) compaction of the elements above t.
template <bool kCollect>
SelectResult accumulate_impl(const float* g, float* e, size_t n, float t, uint32_t* idx, float* val,
                             size_t cap, const PendingFixes& fix) {
  FixCursor fixes(fix);
  SelectResult r;
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  const __m256 vt = _mm256_set1_ps(t);
  __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i eight = _mm256_set1_epi32(8);
  __m256 vmax = _mm256_setzero_ps();
  __m256 vsum;
  __m256i vfinite;  // per lane: how many finite sums in this block
  // One group of 8 at i. kRoomSure: the caller checked that every group of the block finds room.
  const auto group = [&](size_t i, auto room_sure) {
    constexpr bool kRoomSure = decltype(room_sure)::value;
    __m256 ve = _mm256_loadu_ps(e + i);
    if (fixes.next < i + 8) {  // a few percent of the groups
      __m256 lanes;
      const __m256 sum = fixes.of_group(i, lanes);
      ve = _mm256_blendv_ps(ve, _mm256_add_ps(ve, sum), lanes);
    }
    const __m256 v = _mm256_add_ps(_mm256_loadu_ps(g + i), ve);
    const __m256 ok = _mm256_cmp_ps(_mm256_and_ps(v, abs_mask), inf, _CMP_LT_OQ);
    vfinite = _mm256_sub_epi32(vfinite, _mm256_castps_si256(ok));  // ok lanes are -1
    const __m256 kept = _mm256_blendv_ps(ve, v, ok);
    const __m256 a = _mm256_and_ps(kept, abs_mask);
    vsum = _mm256_add_ps(vsum, a);
    vmax = _mm256_max_ps(vmax, a);
    if constexpr (kCollect) {
      // Branch-free: a data-dependent branch here mispredicts on ~15% of vectors.
      const __m256 above = _mm256_cmp_ps(a, vt, _CMP_GT_OQ);
      const bool room = kRoomSure || r.count + 8 <= cap;  // every element of the group fits
      const __m256 clear = room ? above : _mm256_setzero_ps();
      _mm256_storeu_ps(e + i, _mm256_blendv_ps(kept, _mm256_setzero_ps(), clear));
      compact_store(_mm256_movemask_ps(above), index, kept, idx, val, r.count,
                    kRoomSure ? SIZE_MAX : cap);
      if constexpr (!kRoomSure) r.cleared = room ? r.count : r.cleared;
      index = _mm256_add_epi32(index, eight);
    } else {
      _mm256_storeu_ps(e + i, kept);
    }
  };
  size_t i = 0;
  while (i + 8 <= n) {
    const size_t block_start = i;
    const size_t block_end = std::min(n & ~size_t{7}, i + kBlock);
    vsum = _mm256_setzero_ps();
    vfinite = _mm256_setzero_si256();
    if (!kCollect || r.count + (block_end - i) <= cap) {  // the common case: far from full
      for (; i < block_end; i += 8) group(i, std::true_type{});
      if (kCollect) r.cleared = r.count;
    } else {
      for (; i < block_end; i += 8) group(i, std::false_type{});
    }
    r.stats.abs_sum += horizontal_sum(vsum);
    r.stats.nonfinite += (block_end - block_start) - horizontal_sum_epi32(vfinite);
  }
  r.stats.abs_max = horizontal_max(vmax);
  fixes.apply_rest(e, n);  // the tail's
  accumulate_tail<kCollect>(g, e, i, n, t, idx, val, cap, r);
  return r;
}

SelectResult accumulate_select(const float* g, float* e, size_t n, float t, uint32_t* idx,
                               float* val, size_t cap, const PendingFixes& fix) {
  return accumulate_impl<true>(g, e, n, t, idx, val, cap, fix);
}

AbsStats abs_stats(const float* g, const float* e, size_t n) {
  AbsStats s;
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  __m256 vmax = _mm256_setzero_ps();
  size_t i = 0;
  while (i + 8 <= n) {
    const size_t block_end = std::min(n & ~size_t{7}, i + kBlock);
    __m256 vsum = _mm256_setzero_ps();
    for (; i < block_end; i += 8) {
      const __m256 vg = _mm256_loadu_ps(g + i);
      const __m256 a = _mm256_and_ps(e ? _mm256_add_ps(vg, _mm256_loadu_ps(e + i)) : vg, abs_mask);
      const __m256 ok = _mm256_cmp_ps(a, inf, _CMP_LT_OQ);
      const __m256 kept = _mm256_and_ps(a, ok);
      vsum = _mm256_add_ps(vsum, kept);
      vmax = _mm256_max_ps(vmax, kept);
      s.nonfinite += 8 - static_cast<size_t>(__builtin_popcount(_mm256_movemask_ps(ok)));
    }
    s.abs_sum += horizontal_sum(vsum);
  }
  s.abs_max = horizontal_max(vmax);
  for (; i < n; ++i) {
    const float a = std::fabs(e ? g[i] + e[i] : g[i]);
    if (!finite(a)) {
      ++s.nonfinite;
      continue;
    }
    s.abs_sum += a;
    s.abs_max = std::max(s.abs_max, a);
  }
  return s;
}

AbsStats accumulate(const float* g, float* e, size_t n) {
  return accumulate_impl<false>(g, e, n, 0.0f, nullptr, nullptr, 0, PendingFixes{}).stats;
}

size_t scan_select(const float* e, size_t n, float t, uint32_t* idx, float* val, size_t cap) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 vt = _mm256_set1_ps(t);
  __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i eight = _mm256_set1_epi32(8);
  size_t count = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(e + i);
    const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(v, abs_mask), vt, _CMP_GT_OQ));
    compact_store(hit, index, v, idx, val, count, cap);
    index = _mm256_add_epi32(index, eight);
  }
  return scan_select_from(e, i, n, t, idx, val, count, cap);
}
#else
// The same summation order as the AVX2 loops (8 float lanes per 4096-element block, lanes added
// into a double in order, the tail element by element), so both give bit-identical statistics
// and therefore the same thresholds and selections.
template <typename Value>
AbsStats lane_stats(size_t n, Value&& kept_abs) {
  AbsStats s;
  const size_t whole = n & ~size_t{7};
  for (size_t start = 0; start < whole; start += kBlock) {
    const size_t end = std::min(whole, start + kBlock);
    float lanes[8] = {};
    for (size_t i = start; i < end; i += 8) {
      for (size_t lane = 0; lane < 8; ++lane) {
        const float a = kept_abs(i + lane, s.nonfinite);
        lanes[lane] += a;
        s.abs_max = std::max(s.abs_max, a);
      }
    }
    double block = 0.0;
    for (float lane : lanes) block += lane;
    s.abs_sum += block;
  }
  for (size_t i = whole; i < n; ++i) {
    const float a = kept_abs(i, s.nonfinite);
    s.abs_sum += a;
    s.abs_max = std::max(s.abs_max, a);
  }
  return s;
}

AbsStats abs_stats(const float* g, const float* e, size_t n) {
  return lane_stats(n, [&](size_t i, size_t& bad) {
    const float a = std::fabs(e ? g[i] + e[i] : g[i]);
    const bool ok = a <= std::numeric_limits<float>::max();
    bad += !ok;
    return ok ? a : 0.0f;
  });
}

AbsStats accumulate(const float* g, float* e, size_t n) {
  return lane_stats(n, [&](size_t i, size_t& bad) {
    const float v = g[i] + e[i];
    const bool ok = std::fabs(v) <= std::numeric_limits<float>::max();
    bad += !ok;
    e[i] = ok ? v : e[i];
    return std::fabs(e[i]);
  });
}

SelectResult accumulate_select(const float* g, float* e, size_t n, float t, uint32_t* idx,
                               float* val, size_t cap, const PendingFixes& fix) {
  for (size_t j = 0; j < fix.count; ++j) e[fix.indices[j]] += fix.values[j];
  SelectResult r;
  r.stats = accumulate(g, e, n);
  for (size_t start = 0; start < n; start += 8) {  // groups of 8, as the AVX2 loop
    const bool room = r.count + 8 <= cap;
    for (size_t i = start; i < std::min(n, start + 8); ++i) {
      if (std::fabs(e[i]) > t) {
        const size_t pos = std::min(r.count, cap);
        idx[pos] = static_cast<uint32_t>(i);
        val[pos] = e[i];
        if (room) e[i] = 0.0f;
        ++r.count;
      }
    }
    if (room) r.cleared = r.count;
  }
  return r;
}

size_t scan_select(const float* e, size_t n, float t, uint32_t* idx, float* val, size_t cap) {
  return scan_select_from(e, 0, n, t, idx, val, 0, cap);
}
#endif

}  // namespace
}  // namespace gradgate::kernels::cpu::GRADGATE_ISA_NS
