// Implementation of the LoopTable, included once per instruction set by loops_<isa>.cc inside
// namespace GRADGATE_ISA_NS. Plain loops are left to the compiler's vectoriser (which then targets
// the file's -m flags); the loops it cannot vectorise well (branch-free compaction of selected
// elements, fp16 conversion) have hand-written AVX2 versions under `#if defined(__AVX2__)`.
// Only to be included by loops_*.cc.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "gradgate/kernels/element_rules.h"
#include "gradgate/kernels/half.h"
#include "gradgate/kernels/philox.h"
#include "loops.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace gradgate::kernels::cpu::GRADGATE_ISA_NS {
namespace {

using rules::finite;

// ---- plain float loops ---------------------------------------------------------------------

size_t copy_checked(const float* in, float* out, size_t n) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    out[i] = in[i];
    bad += !finite(in[i]);
  }
  return bad;
}

size_t count_nonfinite(const float* in, size_t n) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += !finite(in[i]);
  return bad;
}

void add(const float* in, float* acc, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += in[i];
}

size_t sum_checked(const float* a, const float* b, float* out, size_t n) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    out[i] = a[i] + b[i];
    bad += !finite(out[i]);
  }
  return bad;
}

// ---- fp16 / bf16 -----------------------------------------------------------------------------

template <typename Format>
size_t encode_half_scalar(const float* g, float* e, uint16_t* out, size_t n) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const float v = e ? g[i] + e[i] : g[i];
    const uint16_t h = rules::half_encode<Format>(v);
    out[i] = h;
    if (e) e[i] = rules::residual_after(v, Format::decode(h), e[i]);
    bad += !rules::half_sendable<Format>(v, e != nullptr);
  }
  return bad;
}

#if defined(__AVX2__)
// The lanes of v an encoder can send: magnitude bits below `limit` (rules::half_send_limit).
inline __m256 half_sendable(__m256 v, __m256i limit) {
  const __m256i magnitude = _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7FFFFFFF));
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(limit, magnitude));
}

template <typename Format>
__m256i half_send_limit(const float* e) {
  return _mm256_set1_epi32(static_cast<int>(rules::half_send_limit<Format>(e != nullptr)));
}
#endif

#if defined(__AVX2__)
size_t encode_bf16(const float* g, float* e, uint16_t* out, size_t n) {
  const __m256i limit = half_send_limit<rules::Bf16>(e);
  const __m256 highest = _mm256_set1_ps(kBf16Max), lowest = _mm256_set1_ps(-kBf16Max);
  const __m256i bias = _mm256_set1_epi32(0x7FFF);
  const __m256i one = _mm256_set1_epi32(1);
  size_t bad = 0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i halves[2];
    for (int j = 0; j < 2; ++j) {
      const size_t at = i + 8 * static_cast<size_t>(j);
      const __m256 ve = e ? _mm256_loadu_ps(e + at) : _mm256_setzero_ps();
      const __m256 vg = _mm256_loadu_ps(g + at);
      const __m256 v = e ? _mm256_add_ps(vg, ve) : vg;  // without a residual, g itself (-0 stays)
      const __m256i u = _mm256_castps_si256(_mm256_min_ps(_mm256_max_ps(v, lowest), highest));
      const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
      const __m256i h = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, odd)), 16);
      halves[j] = h;
      const __m256 ok = half_sendable(v, limit);
      bad += 8 - static_cast<size_t>(__builtin_popcount(_mm256_movemask_ps(ok)));
      if (e) {
        const __m256 err = _mm256_sub_ps(v, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
        _mm256_storeu_ps(e + at, _mm256_blendv_ps(ve, err, ok));
      }
    }
    const __m256i packed =
        _mm256_permute4x64_epi64(_mm256_packus_epi32(halves[0], halves[1]), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
  }
  return bad + encode_half_scalar<rules::Bf16>(g + i, e ? e + i : nullptr, out + i, n - i);
}
#else
size_t encode_bf16(const float* g, float* e, uint16_t* out, size_t n) {
  return encode_half_scalar<rules::Bf16>(g, e, out, n);
}
#endif

#if defined(__AVX2__) && defined(__F16C__)
size_t encode_fp16(const float* g, float* e, uint16_t* out, size_t n) {
  const __m256i limit = half_send_limit<rules::Fp16>(e);
  const __m256 highest = _mm256_set1_ps(kFp16Max), lowest = _mm256_set1_ps(-kFp16Max);
  size_t bad = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 ve = e ? _mm256_loadu_ps(e + i) : _mm256_setzero_ps();
    const __m256 vg = _mm256_loadu_ps(g + i);
    const __m256 v = e ? _mm256_add_ps(vg, ve) : vg;  // without a residual, g itself (-0 stays)
    const __m256 clamped = _mm256_min_ps(_mm256_max_ps(v, lowest), highest);
    const __m128i h = _mm256_cvtps_ph(clamped, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
    const __m256 ok = half_sendable(v, limit);
    bad += 8 - static_cast<size_t>(__builtin_popcount(_mm256_movemask_ps(ok)));
    if (e) {
      const __m256 err = _mm256_sub_ps(v, _mm256_cvtph_ps(h));
      _mm256_storeu_ps(e + i, _mm256_blendv_ps(ve, err, ok));
    }
  }
  return bad + encode_half_scalar<rules::Fp16>(g + i, e ? e + i : nullptr, out + i, n - i);
}
#else
size_t encode_fp16(const float* g, float* e, uint16_t* out, size_t n) {
  return encode_half_scalar<rules::Fp16>(g, e, out, n);
}
#endif

template <typename Format>
size_t count_nonfinite_half(const uint16_t* in, size_t n) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += !rules::half_finite<Format>(in[i]);
  return bad;
}

size_t count_nonfinite_fp16(const uint16_t* in, size_t n) {
  return count_nonfinite_half<rules::Fp16>(in, n);
}

size_t count_nonfinite_bf16(const uint16_t* in, size_t n) {
  return count_nonfinite_half<rules::Bf16>(in, n);
}

template <typename Format>
void add_half_scalar(const uint16_t* in, float* acc, size_t begin, size_t n) {
  for (size_t i = begin; i < n; ++i) acc[i] += Format::decode(in[i]);
}

// out = half(a + b); returns how many sums are infinite or NaN.
template <typename Format>
size_t sum_half_scalar(const uint16_t* a, const uint16_t* b, uint16_t* out, size_t begin,
                       size_t n) {
  size_t bad = 0;
  for (size_t i = begin; i < n; ++i) {
    out[i] = rules::half_sum<Format>(a[i], b[i]);
    bad += !rules::half_finite<Format>(out[i]);
  }
  return bad;
}

#if defined(__AVX2__) && defined(__F16C__)
void add_fp16(const uint16_t* in, float* acc, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), v));
  }
  add_half_scalar<rules::Fp16>(in, acc, i, n);
}

size_t sum_fp16(const uint16_t* a, const uint16_t* b, uint16_t* out, size_t n) {
  size_t bad = 0;
  size_t i = 0;
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  for (; i + 8 <= n; i += 8) {
    const __m256 va = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    const __m256 vb = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    const __m128i h =
        _mm256_cvtps_ph(_mm256_add_ps(va, vb), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
    const __m256 ok = _mm256_cmp_ps(_mm256_and_ps(_mm256_cvtph_ps(h), abs_mask), inf, _CMP_LT_OQ);
    bad += 8 - static_cast<size_t>(__builtin_popcount(_mm256_movemask_ps(ok)));
  }
  return bad + sum_half_scalar<rules::Fp16>(a, b, out, i, n);
}
#else
void add_fp16(const uint16_t* in, float* acc, size_t n) {
  add_half_scalar<rules::Fp16>(in, acc, 0, n);
}

size_t sum_fp16(const uint16_t* a, const uint16_t* b, uint16_t* out, size_t n) {
  return sum_half_scalar<rules::Fp16>(a, b, out, 0, n);
}
#endif

void add_bf16(const uint16_t* in, float* acc, size_t n) {
  add_half_scalar<rules::Bf16>(in, acc, 0, n);
}

size_t sum_bf16(const uint16_t* a, const uint16_t* b, uint16_t* out, size_t n) {
  return sum_half_scalar<rules::Bf16>(a, b, out, 0, n);
}

// ---- |v| statistics, accumulation and threshold selection -----------------------------------

// Float partial sums are flushed into a double every kBlock elements to keep the sum accurate (the
// order every implementation of the sum follows, see element_rules.h).
constexpr size_t kBlock = rules::kSumBlock;

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

// e += fix (element by element, just before the pass reaches them), e += g, statistics, and
// (kCollect) compaction of the elements above t.
template <bool kCollect>
SelectResult accumulate_impl(const float* g, float* e, size_t n, float t, uint32_t* idx, float* val,
                             size_t cap, const PendingFixes& fix) {
  size_t f = 0;
  size_t next_fix = fix.count ? fix.indices[0] : SIZE_MAX;
  const __m256i lane_ids = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  // The fixes of the group at i as a vector (built in registers: a scalar store into e right
  // before the vector load of the same line would stall store forwarding), and their lanes.
  const auto fixes_of_group = [&](size_t i, __m256& lanes) {
    __m256 sum = _mm256_setzero_ps();
    lanes = _mm256_setzero_ps();
    while (next_fix < i + 8) {
      const __m256 lane = _mm256_castsi256_ps(
          _mm256_cmpeq_epi32(lane_ids, _mm256_set1_epi32(static_cast<int>(next_fix - i))));
      sum = _mm256_add_ps(sum, _mm256_and_ps(lane, _mm256_set1_ps(fix.values[f])));
      lanes = _mm256_or_ps(lanes, lane);
      next_fix = ++f < fix.count ? fix.indices[f] : SIZE_MAX;
    }
    return sum;
  };
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
    if (next_fix < i + 8) {  // a few percent of the groups
      __m256 lanes;
      const __m256 fixes = fixes_of_group(i, lanes);
      ve = _mm256_blendv_ps(ve, _mm256_add_ps(ve, fixes), lanes);
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
  const bool room = r.count + 8 <= cap;  // the tail is the last group
  for (; next_fix < n; next_fix = ++f < fix.count ? fix.indices[f] : SIZE_MAX) {
    e[next_fix] += fix.values[f];  // the tail's
  }
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
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::fabs(e[i]) > t) {
      const size_t pos = std::min(count, cap);
      idx[pos] = static_cast<uint32_t>(i);
      val[pos] = e[i];
      ++count;
    }
  }
  return count;
}
#endif

// ---- qsgd ------------------------------------------------------------------------------------

using rules::kQsgdPhiloxRounds;

// Elements [begin, end) one at a time; the reference for the vector path.
template <typename Int>
size_t quantize_scalar(const float* g, float* e, Int* out, size_t begin, size_t end, float scale,
                       int levels, const rules::QsgdKey& key) {
  const rules::QsgdGrid grid = rules::qsgd_grid(scale, levels);
  size_t bad = 0;
  for (size_t i = begin; i < end; ++i) {
    const float v = e ? g[i] + e[i] : g[i];
    if (!finite(v)) {
      ++bad;
      out[i] = 0;
      continue;
    }
    const float u = rules::qsgd_uniform(rules::qsgd_bits(philox_block(i), key), i);
    const int32_t q = rules::qsgd_level(v, u, grid);
    out[i] = static_cast<Int>(q);
    if (e) e[i] = v - rules::qsgd_value(q, grid.to_value);
  }
  return bad;
}

#if defined(__AVX2__)
// 8 lanes of 32x32 -> 64-bit products of a and the constant m: high and low halves.
inline void mulhilo8(__m256i a, __m256i m, __m256i& hi, __m256i& lo) {
  const __m256i even = _mm256_mul_epu32(a, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

// Philox4x32 (kQsgdPhiloxRounds) on 8 consecutive blocks at once; r[j] lane L = word j of block
// first + L.
inline void philox8(uint64_t first, const rules::QsgdKey& k, __m256i r[4]) {
  __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(first))),
                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i c1 =
      _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(first >> 32) ^ k.counter_hi[0]));
  __m256i c2 = _mm256_set1_epi32(static_cast<int>(k.counter_hi[1]));
  __m256i c3 = _mm256_set1_epi32(0x51D0);
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  uint32_t k0 = k.key[0], k1 = k.key[1];
  for (int round = 0; round < kQsgdPhiloxRounds; ++round) {
    __m256i hi0, lo0, hi1, lo1;
    mulhilo8(c0, m0, hi0, lo0);
    mulhilo8(c2, m1, hi1, lo1);
    c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(k0)));
    c1 = lo1;
    c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(k1)));
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  r[0] = c0;
  r[1] = c1;
  r[2] = c2;
  r[3] = c3;
}

// Stores 32 int32 levels (4 vectors of 8 consecutive elements) as Int.
template <typename Int>
inline void store_levels(const __m256i q[4], Int* out) {
  if constexpr (sizeof(Int) == 4) {
    for (int j = 0; j < 4; ++j) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8 * j), q[j]);
  } else if constexpr (sizeof(Int) == 2) {
    for (int j = 0; j < 4; j += 2) {
      const __m256i packed = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[j], q[j + 1]), 0xD8);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8 * j), packed);
    }
  } else {
    const __m256i p01 = _mm256_packs_epi32(q[0], q[1]);
    const __m256i p23 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i packed = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p01, p23),
                                                       _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), packed);
  }
}

template <typename Int>
size_t quantize(const float* g, float* e, Int* out, size_t n, float scale, int levels,
                const rules::QsgdKey& key) {
  const rules::QsgdGrid grid = rules::qsgd_grid(scale, levels);
  const __m256 to_levels = _mm256_set1_ps(grid.to_levels);
  const __m256 to_value = _mm256_set1_ps(grid.to_value);
  const __m256 max_level = _mm256_set1_ps(grid.max_level);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  const __m256 to_unit = _mm256_set1_ps(1.0f / 65536.0f);
  const __m256i low16 = _mm256_set1_epi32(0xFFFF);
  size_t bad = 0;
  size_t base = 0;
  for (; base + 64 <= n; base += 64) {
    __m256i bits[4];
    philox8(philox_block(base), key, bits);
    __m256i q[8];
    for (int s = 0; s < 8; ++s) {  // element base + 8s + lane: word s / 2, half s % 2
      const size_t i = base + 8 * static_cast<size_t>(s);
      const __m256i word = bits[s / 2];
      const __m256i r16 = (s % 2) ? _mm256_srli_epi32(word, 16) : _mm256_and_si256(word, low16);
      const __m256 ve = e ? _mm256_loadu_ps(e + i) : _mm256_setzero_ps();
      const __m256 v = _mm256_add_ps(_mm256_loadu_ps(g + i), ve);
      const __m256 a = _mm256_and_ps(v, abs_mask);
      const __m256 ok = _mm256_cmp_ps(a, inf, _CMP_LT_OQ);
      bad += 8 - static_cast<size_t>(__builtin_popcount(_mm256_movemask_ps(ok)));
      const __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(r16), to_unit);
      // Clamped to the top level, truncation is floor (the operand is >= 0); sign_epi32 applies
      // v's sign (v = 0 has level 0 anyway). NaN lanes are masked to 0.
      const __m256i level = _mm256_cvttps_epi32(
          _mm256_min_ps(_mm256_add_ps(_mm256_mul_ps(a, to_levels), u), max_level));
      q[s] = _mm256_and_si256(_mm256_sign_epi32(level, _mm256_castps_si256(v)),
                              _mm256_castps_si256(ok));
      if (e) {
        const __m256 err = _mm256_sub_ps(v, _mm256_mul_ps(_mm256_cvtepi32_ps(q[s]), to_value));
        _mm256_storeu_ps(e + i, _mm256_blendv_ps(ve, err, ok));
      }
    }
    store_levels(q, out + base);
    store_levels(q + 4, out + base + 32);
  }
  return bad + quantize_scalar(g, e, out, base, n, scale, levels, key);
}
#else
template <typename Int>
size_t quantize(const float* g, float* e, Int* out, size_t n, float scale, int levels,
                const rules::QsgdKey& key) {
  return quantize_scalar(g, e, out, 0, n, scale, levels, key);
}
#endif

size_t quantize_i8(const float* g, float* e, int8_t* out, size_t n, float scale, int levels,
                   const rules::QsgdKey& key) {
  return quantize(g, e, out, n, scale, levels, key);
}
size_t quantize_i16(const float* g, float* e, int16_t* out, size_t n, float scale, int levels,
                    const rules::QsgdKey& key) {
  return quantize(g, e, out, n, scale, levels, key);
}
size_t quantize_i32(const float* g, float* e, int32_t* out, size_t n, float scale, int levels,
                    const rules::QsgdKey& key) {
  return quantize(g, e, out, n, scale, levels, key);
}

template <typename Int>
void dequantize_add(const Int* in, float step, float* acc, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += rules::qsgd_value(in[i], step);
}

template <typename Int>
uint32_t max_abs(const Int* in, size_t n) {
  int64_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    const int64_t v = in[i];
    m = std::max(m, v < 0 ? -v : v);
  }
  return static_cast<uint32_t>(m);
}

template <typename Int>
void sum_ints(const Int* a, const Int* b, Int* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = rules::qsgd_sum(a[i], b[i]);
}

// ---- sign ------------------------------------------------------------------------------------

size_t encode_sign(const float* g, float* e, uint8_t* out, size_t n, float scale) {
  size_t bad = 0;
  for (size_t byte = 0; byte * 8 < n; ++byte) {
    uint8_t bits = 0;
    const size_t lanes = std::min<size_t>(8, n - byte * 8);
    for (size_t lane = 0; lane < lanes; ++lane) {
      const size_t i = byte * 8 + lane;
      const float v = e ? g[i] + e[i] : g[i];
      const bool positive = rules::sign_bit(v);
      bits = static_cast<uint8_t>(bits | (positive << lane));
      if (e) e[i] = rules::residual_after(v, rules::sign_value(positive, scale), e[i]);
      bad += !finite(v);
    }
    out[byte] = bits;
  }
  return bad;
}

void add_sign_scalar(const uint8_t* in, float scale, float* acc, size_t begin, size_t n) {
  for (size_t i = begin; i < n; ++i)
    acc[i] += rules::sign_value((in[i / 8] >> (i % 8)) & 1u, scale);
}

#if defined(__AVX2__)
void add_sign(const uint8_t* in, float scale, float* acc, size_t n) {
  const __m256i lane_bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256 plus = _mm256_set1_ps(scale), minus = _mm256_set1_ps(-scale);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i byte = _mm256_set1_epi32(in[i / 8]);
    const __m256i set = _mm256_cmpeq_epi32(_mm256_and_si256(byte, lane_bits), lane_bits);
    const __m256 value = _mm256_blendv_ps(minus, plus, _mm256_castsi256_ps(set));
    _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), value));
  }
  add_sign_scalar(in, scale, acc, i, n);
}
#else
void add_sign(const uint8_t* in, float scale, float* acc, size_t n) {
  add_sign_scalar(in, scale, acc, 0, n);
}
#endif

}  // namespace

extern const LoopTable kLoops;
const LoopTable kLoops = {
    .isa = GRADGATE_ISA_NAME,
    .copy_checked = copy_checked,
    .count_nonfinite = count_nonfinite,
    .add = add,
    .sum_checked = sum_checked,
    .encode_fp16 = encode_fp16,
    .encode_bf16 = encode_bf16,
    .count_nonfinite_fp16 = count_nonfinite_fp16,
    .count_nonfinite_bf16 = count_nonfinite_bf16,
    .add_fp16 = add_fp16,
    .add_bf16 = add_bf16,
    .sum_fp16 = sum_fp16,
    .sum_bf16 = sum_bf16,
    .abs_stats = abs_stats,
    .accumulate = accumulate,
    .accumulate_select = accumulate_select,
    .scan_select = scan_select,
    .quantize_i8 = quantize_i8,
    .quantize_i16 = quantize_i16,
    .quantize_i32 = quantize_i32,
    .dequantize_add_i8 = dequantize_add<int8_t>,
    .dequantize_add_i16 = dequantize_add<int16_t>,
    .dequantize_add_i32 = dequantize_add<int32_t>,
    .max_abs_i8 = max_abs<int8_t>,
    .max_abs_i16 = max_abs<int16_t>,
    .max_abs_i32 = max_abs<int32_t>,
    .sum_i8 = sum_ints<int8_t>,
    .sum_i16 = sum_ints<int16_t>,
    .sum_i32 = sum_ints<int32_t>,
    .encode_sign = encode_sign,
    .add_sign = add_sign,
};

}  // namespace gradgate::kernels::cpu::GRADGATE_ISA_NS
