// The per-element arithmetic of the element-wise codecs (none, fp16, bf16, qsgd, sign), defined
// once and host-device: the CPU loops' scalar paths and the CUDA kernels both call these, so every
// implementation rounds, saturates, draws random bits and keeps residuals alike, bit for bit (the
// CPU's AVX2 loops are vector forms of the same rules and are tested against them). Both sides are
// compiled without fused multiply-add contraction, which these rules rely on.
//
// Error feedback: an encoder sends v = g + e (g alone when the stream keeps no residual) and keeps
// in e what the wire does not carry. Where v is NaN or infinite the encode fails: the element is
// counted and its residual is left as it was (fp16 and bf16 without a residual also refuse a v
// beyond their range: half_sendable).
//
// Pure functions of their arguments: no state, no allocation, safe anywhere.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "gradgate/kernels/half.h"
#include "gradgate/kernels/philox.h"

namespace gradgate::kernels::rules {

GRADGATE_HOST_DEVICE inline bool finite(float v) {
  return (float_bits(v) & 0x7F800000u) != 0x7F800000u;
}

GRADGATE_HOST_DEVICE inline float magnitude(float v) {
  return bits_float(float_bits(v) & 0x7FFFFFFFu);
}

/// The value an encoder sends: g plus the residual `e`, or g alone when `e` is null.
GRADGATE_HOST_DEVICE inline float ef_value(float g, const float* e) { return e ? g + *e : g; }

/// The residual after sending `sent` for v: v - sent, or `residual` unchanged where v is not
/// finite.
GRADGATE_HOST_DEVICE inline float residual_after(float v, float sent, float residual) {
  return finite(v) ? v - sent : residual;
}

/// Undoes the error feedback of a failed encode for one element: e + decoded - g, where that is
/// finite (an element whose v overflowed was never updated). `decoded` is what the element of the
/// partial frame decodes to.
GRADGATE_HOST_DEVICE inline float restored_residual(float g, float decoded, float e) {
  const float before = e + decoded - g;
  return finite(before) ? before : e;
}

/// |v|, or 0 where v is not finite: the term of the |v| statistics (sign's scale, qsgd's max).
GRADGATE_HOST_DEVICE inline float kept_magnitude(float v) {
  return finite(v) ? magnitude(v) : 0.0f;
}

/// The order of the |v| sum behind sign's scale, which every implementation follows to get the
/// same float: over the first n & ~7 elements, blocks of kSumBlock elements; in a block, lane l of
/// kSumLanes sums elements l, l + 8, ... in float; the lanes are added in order into a double, and
/// the blocks' doubles in order into the total; the last n % 8 elements are added one by one.
inline constexpr uint64_t kSumBlock = 4096;
inline constexpr uint64_t kSumLanes = 8;

// ---- fp16 and bf16 ------------------------------------------------------------------------------

struct Fp16 {
  static constexpr float kMax = kFp16Max;
  static constexpr uint32_t kOverflowBits = 0x477FF000u;  // 65520: rounds to infinity
  static constexpr uint16_t kExponent = 0x7C00u;
  GRADGATE_HOST_DEVICE static uint16_t encode(float v) { return float_to_fp16(v); }
  GRADGATE_HOST_DEVICE static float decode(uint16_t h) { return fp16_to_float(h); }
};

struct Bf16 {
  static constexpr float kMax = kBf16Max;
  static constexpr uint32_t kOverflowBits = 0x7F7F8000u;  // rounds to infinity
  static constexpr uint16_t kExponent = 0x7F80u;
  GRADGATE_HOST_DEVICE static uint16_t encode(float v) { return float_to_bf16(v); }
  GRADGATE_HOST_DEVICE static float decode(uint16_t h) { return bf16_to_float(h); }
};

/// v rounded to nearest even, saturated at the format's largest finite value (NaN stays NaN; the
/// residual keeps the excess).
template <typename Format>
GRADGATE_HOST_DEVICE inline uint16_t half_encode(float v) {
  const float clamped = v < -Format::kMax ? -Format::kMax : (Format::kMax < v ? Format::kMax : v);
  return Format::encode(clamped);
}

/// The magnitude (float bits) from which an encoder cannot send v. With a residual, infinity: any
/// finite v goes, saturated, and the residual keeps the excess. Without one, the format's
/// overflow threshold: a v whose rounding is infinite (what PyTorch's cast to the format gives)
/// is refused like an infinite one, rather than sent as the largest value, which would change the
/// sum unseen (a loss scaler watches for infinities).
template <typename Format>
GRADGATE_HOST_DEVICE inline uint32_t half_send_limit(bool keeps_residual) {
  return keeps_residual ? 0x7F800000u : Format::kOverflowBits;
}

/// Whether an encoder can send v (half_send_limit); NaN never.
template <typename Format>
GRADGATE_HOST_DEVICE inline bool half_sendable(float v, bool keeps_residual) {
  return (float_bits(v) & 0x7FFFFFFFu) < half_send_limit<Format>(keeps_residual);
}

/// False for the 16-bit infinities and NaNs (exponent all ones).
template <typename Format>
GRADGATE_HOST_DEVICE inline bool half_finite(uint16_t h) {
  return (h & Format::kExponent) != Format::kExponent;
}

/// The sum of two 16-bit values, added in fp32 and rounded back (not saturated: an overflow is
/// infinite, which the caller reports).
template <typename Format>
GRADGATE_HOST_DEVICE inline uint16_t half_sum(uint16_t a, uint16_t b) {
  return Format::encode(Format::decode(a) + Format::decode(b));
}

// ---- qsgd -------------------------------------------------------------------------------------

/// Stochastic rounding draws from Philox4x32-7 (see philox.h).
inline constexpr int kQsgdPhiloxRounds = 7;

/// The Philox key (job seed, worker) and the high counter words (tensor, step) of one encode.
struct QsgdKey {
  uint32_t key[2];
  uint32_t counter_hi[2];
};

GRADGATE_HOST_DEVICE inline QsgdKey qsgd_key(uint64_t job_seed, uint32_t worker, uint32_t tensor_id,
                                             uint64_t step) {
  const uint64_t key = mix64(job_seed ^ (static_cast<uint64_t>(worker) << 32 | 0x9E37u));
  return {{static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)},
          {tensor_id, static_cast<uint32_t>(step)}};
}

/// The random bits of counter block `block` (philox_block(i) for element i).
GRADGATE_HOST_DEVICE inline Philox4 qsgd_bits(uint64_t block, const QsgdKey& k) {
  return philox4x32<kQsgdPhiloxRounds>(
      {{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32) ^ k.counter_hi[0],
        k.counter_hi[1], 0x51D0u}},
      k.key[0], k.key[1]);
}

/// Element i's uniform in [0, 1), from the bits of its block.
GRADGATE_HOST_DEVICE inline float qsgd_uniform(const Philox4& bits, uint64_t i) {
  return uniform16(bits.v[philox_word(i)], philox_half(i));
}

/// The quantisation grid of one scale: |v| * to_levels is in levels, a level is worth to_value.
struct QsgdGrid {
  float to_levels;
  float to_value;
  float max_level;
};

/// A scale so small that levels / scale overflows (below about levels * 3e-39) sends level 0 for
/// every element, as a zero scale does: 0 * inf would be NaN, and the residual keeps the values.
GRADGATE_HOST_DEVICE inline QsgdGrid qsgd_grid(float scale, int levels) {
  const auto s = static_cast<float>(levels);
  const float to_levels = scale > 0.0f ? s / scale : 0.0f;
  return {to_levels <= FLT_MAX ? to_levels : 0.0f, scale / s, s};
}

/// sign(v) * min(floor(|v| * to_levels + u), levels); 0 where v is not finite.
GRADGATE_HOST_DEVICE inline int32_t qsgd_level(float v, float u, const QsgdGrid& grid) {
  if (!finite(v)) return 0;
  const float scaled = floorf(magnitude(v) * grid.to_levels + u);
  const float level = grid.max_level < scaled ? grid.max_level : scaled;
  return static_cast<int32_t>(v < 0.0f ? -level : level);
}

/// What a (summed) level decodes to: level * scale / levels.
GRADGATE_HOST_DEVICE inline float qsgd_value(int32_t level, float to_value) {
  return static_cast<float>(level) * to_value;
}

/// The sum of two wire levels, wrapping (the headroom bits keep checked sums in range).
template <typename Int>
GRADGATE_HOST_DEVICE inline Int qsgd_sum(Int a, Int b) {
  return static_cast<Int>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}

// ---- sign -------------------------------------------------------------------------------------

/// The bit sent for v: set for v >= 0 (clear for NaN).
GRADGATE_HOST_DEVICE inline bool sign_bit(float v) { return v >= 0.0f; }

GRADGATE_HOST_DEVICE inline float sign_value(bool bit, float scale) { return bit ? scale : -scale; }

}  // namespace gradgate::kernels::rules
