// Scalar conversions between fp32 and the 16-bit wire formats (IEEE fp16, bfloat16), both with
// round-to-nearest-even. Host-device functions, so CPU and CUDA codecs produce the same bits.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define GRADGATE_HOST_DEVICE __host__ __device__
#else
#define GRADGATE_HOST_DEVICE
#endif

namespace gradgate::kernels {

/// Largest finite values of the 16-bit formats. Encoders saturate there; error feedback keeps the
/// excess in the residual.
inline constexpr float kFp16Max = 65504.0f;
inline constexpr float kBf16Max = 3.38953139e38f;  // bits 0x7F7F0000

GRADGATE_HOST_DEVICE inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

GRADGATE_HOST_DEVICE inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

GRADGATE_HOST_DEVICE inline uint16_t float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

GRADGATE_HOST_DEVICE inline float bf16_to_float(uint16_t h) {
  return bits_float(static_cast<uint32_t>(h) << 16);
}

GRADGATE_HOST_DEVICE inline uint16_t float_to_fp16(float f) {
  const uint32_t u = float_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);   // NaN
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to infinity
  if (abs < 0x38800000u) {  // result is subnormal or zero: round abs * 2^24 to an integer
    const float scaled = bits_float(abs) * 16777216.0f;  // exact: 2^24 is a power of two
    // Round half to even using the float adder: adding 2^23 forces rounding at the unit place.
    const float rounded = (scaled + 8388608.0f) - 8388608.0f;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(rounded));
  }
  const uint32_t mantissa_odd = (abs >> 13) & 1u;
  const uint32_t rebased = abs - (112u << 23) + 0xFFFu + mantissa_odd;
  return static_cast<uint16_t>(sign | (rebased >> 13));
}

GRADGATE_HOST_DEVICE inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1F) return bits_float(sign | 0x7F800000u | (mantissa << 13));
  return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

}  // namespace gradgate::kernels
