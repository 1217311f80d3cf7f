// The dense loops of the LoopTable (loops_impl.h): plain float copies and sums, and the fp16 /
// bf16 conversions. Compiled once per instruction set inside namespace GRADGATE_ISA_NS; only to be
// included by loops_impl.h.

#include <cstdint>
#include <limits>

#include "gradgate/kernels/element_rules.h"
#include "gradgate/kernels/half.h"
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

}  // namespace
}  // namespace gradgate::kernels::cpu::GRADGATE_ISA_NS
