// Wire values of the sparse payloads on the device: fp32 or IEEE half, little-endian, at any byte
// alignment (a topk payload puts its values right after its variable-length indices).
#pragma once

#include <cstdint>

#include "gradgate/kernels/half.h"

namespace gradgate::kernels::cuda {

/// Value j of the wire values at `values`.
__device__ inline float load_wire_value(const uint8_t* values, uint64_t j, bool fp16) {
  if (fp16) {
    const uint8_t* at = values + 2 * j;
    return fp16_to_float(static_cast<uint16_t>(at[0] | at[1] << 8));
  }
  const uint8_t* at = values + 4 * j;
  return bits_float(static_cast<uint32_t>(at[0]) | static_cast<uint32_t>(at[1]) << 8 |
                    static_cast<uint32_t>(at[2]) << 16 | static_cast<uint32_t>(at[3]) << 24);
}

/// Stores the `bytes` low bytes of `word` little-endian at `at`.
__device__ inline void store_le_bytes(uint8_t* at, uint32_t word, int bytes) {
  for (int b = 0; b < bytes; ++b) at[b] = static_cast<uint8_t>(word >> (8 * b));
}

}  // namespace gradgate::kernels::cuda
