// Philox4x32 (Salmon et al., SC'11), the counter-based generator behind stochastic rounding and
// random-k selection. Ten rounds is the conservative default; seven is the fewest the authors
// found to pass BigCrush, and is what stochastic rounding uses, where the generator is the
// encode's main cost. Counter-based means element i's random bits depend only on (key, counter),
// so any thread, chunk or device computes the same bits for the same element.
#pragma once

#include <cstdint>

#include "gradgate/kernels/half.h"  // GRADGATE_HOST_DEVICE

namespace gradgate::kernels {

struct Philox4 {
  uint32_t v[4];
};

template <int kRounds = 10>
GRADGATE_HOST_DEVICE inline Philox4 philox4x32(Philox4 counter, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t c0 = counter.v[0], c1 = counter.v[1], c2 = counter.v[2], c3 = counter.v[3];
  for (int round = 0; round < kRounds; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ key0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ key1;
    c0 = n0;
    c1 = static_cast<uint32_t>(p1);
    c2 = n2;
    c3 = static_cast<uint32_t>(p0);
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
  return {{c0, c1, c2, c3}};
}

/// Which random bits serve element i when every element takes a 16-bit uniform: half
/// philox_half(i) of word philox_word(i) of the Philox call on counter block philox_block(i).
/// Groups of 64 elements share 8 consecutive blocks, element 64m + 16j + 8h + L taking half h of
/// word j of block 8m + L, so that 8 SIMD lanes (or 8 GPU threads) computing 8 blocks get 8
/// vectors of 8 consecutive elements. One Philox call thus serves 8 elements.
GRADGATE_HOST_DEVICE inline uint64_t philox_block(uint64_t i) { return (i >> 6) << 3 | (i & 7); }
GRADGATE_HOST_DEVICE inline int philox_word(uint64_t i) { return static_cast<int>((i >> 4) & 3); }
GRADGATE_HOST_DEVICE inline int philox_half(uint64_t i) { return static_cast<int>((i >> 3) & 1); }

/// A uniform float in [0, 1) from 16 random bits (a multiple of 2^-16: stochastic rounding with
/// it is biased by less than 2^-16 of a level).
GRADGATE_HOST_DEVICE inline float uniform16(uint32_t word, int half) {
  return static_cast<float>((word >> (16 * half)) & 0xFFFFu) * (1.0f / 65536.0f);
}

/// A uniform float in [0, 1) from the top 24 bits of `bits`.
GRADGATE_HOST_DEVICE inline float uniform_from_bits(uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

/// 64-bit mix (splitmix64 finaliser) for deriving keys from seeds and ids.
GRADGATE_HOST_DEVICE inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

}  // namespace gradgate::kernels
