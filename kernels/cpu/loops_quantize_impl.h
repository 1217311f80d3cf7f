// The quantizing loops of the LoopTable (loops_impl.h): qsgd's stochastic levels and sign's bits.
// Compiled once per instruction set inside namespace GRADGATE_ISA_NS; only to be included by
// loops_impl.h.

#include <algorithm>
#include <cstdint>
#include <limits>

#include "gradgate/kernels/element_rules.h"
#include "gradgate/kernels/philox.h"
#include "loops.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace gradgate::kernels::cpu::GRADGATE_ISA_NS {
namespace {

using rules::finite;

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
}  // namespace gradgate::kernels::cpu::GRADGATE_ISA_NS
