// The benchmark's synthetic gradient: standard normal values from Philox4x32-10 and Box-Muller,
// one counter block per four elements, so the device kernel and a host check compute the same
// distribution from (seed, element) alone.
#pragma once

#include <cmath>
#include <cstdint>

#include "gradgate/kernels/half.h"  // GRADGATE_HOST_DEVICE
#include "gradgate/kernels/philox.h"

namespace gradgate::bench {

/// Elements 4 * block .. 4 * block + 3 of the gaussian tensor of `seed`.
GRADGATE_HOST_DEVICE inline void gaussian4(uint64_t block, uint64_t seed, float out[4]) {
  const kernels::Philox4 counter{
      {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u}};
  const kernels::Philox4 bits =
      kernels::philox4x32(counter, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  constexpr float kTwoPi = 6.28318530717958647692f;
  for (int pair = 0; pair < 2; ++pair) {
    // u1 in (0, 1] keeps the logarithm finite; u2 in [0, 1).
    const float u1 = static_cast<float>((bits.v[2 * pair] >> 8) + 1u) * (1.0f / 16777216.0f);
    const float u2 = kernels::uniform_from_bits(bits.v[2 * pair + 1]);
    const float radius = sqrtf(-2.0f * logf(u1));
    out[2 * pair] = radius * cosf(kTwoPi * u2);
    out[2 * pair + 1] = radius * sinf(kTwoPi * u2);
  }
}

}  // namespace gradgate::bench
