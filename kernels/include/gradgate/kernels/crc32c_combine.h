// CRC32C arithmetic shared by the CPU and CUDA code: the byte table and the GF(2) algebra that
// combines the checksums of separately checksummed pieces. Host-device, so the parallel checksum
// of the GPU codecs is built from the same functions that the CPU tests check.
//
// A raw CRC register (the value before the final inversion) is linear over GF(2). Feeding B after
// A gives  reg(A || B) = reg(A) * x^(8|B|) mod P  xor  reg0(B),  where reg0(B) is B fed into a zero
// register. So the pieces of a buffer can be checksummed independently from zero, each multiplied
// by x^(8 * bytes after it), and xor-ed together in any order. Polynomials are held in the
// reflected representation of the CRC: bit 31 is the coefficient of x^0.
//
// Pure functions of their arguments; nothing is allocated. Crc32cZeros is a 48 KiB table: build it
// once (at compile time or start-up) and share it read-only between threads and kernels.
#pragma once

#include <cstdint>

#include "gradgate/kernels/half.h"  // GRADGATE_HOST_DEVICE

namespace gradgate::kernels {

inline constexpr uint32_t kCrc32cPolynomial = 0x82F63B78u;  // Castagnoli, reflected
inline constexpr uint32_t kCrc32cOne = 0x80000000u;         // the polynomial 1
inline constexpr uint32_t kCrc32cX8 = kCrc32cOne >> 8;      // x^8: the effect of one zero byte

/// Entry `byte` of the byte-at-a-time table: the register after feeding `byte` into a zero one.
GRADGATE_HOST_DEVICE constexpr uint32_t crc32c_table_entry(uint32_t byte) {
  uint32_t reg = byte;
  for (int bit = 0; bit < 8; ++bit) reg = (reg & 1u) ? (reg >> 1) ^ kCrc32cPolynomial : reg >> 1;
  return reg;
}

/// The register after feeding `byte`, with `table` the 256 entries of crc32c_table_entry.
GRADGATE_HOST_DEVICE inline uint32_t crc32c_step(const uint32_t* table, uint32_t reg,
                                                 uint32_t byte) {
  return table[(reg ^ byte) & 0xFFu] ^ (reg >> 8);
}

/// The register after feeding the 4 bytes of the little-endian `word`.
GRADGATE_HOST_DEVICE inline uint32_t crc32c_step_word(const uint32_t* table, uint32_t reg,
                                                      uint32_t word) {
  reg ^= word;
  for (int byte = 0; byte < 4; ++byte) reg = table[reg & 0xFFu] ^ (reg >> 8);
  return reg;
}

/// The register of the `bytes` bytes held in little-endian `words`, fed into a zero register.
GRADGATE_HOST_DEVICE inline uint32_t crc32c_register(const uint32_t* table, const uint32_t* words,
                                                     uint32_t bytes) {
  uint32_t reg = 0;
  const uint32_t whole = bytes / 4;
  for (uint32_t w = 0; w < whole; ++w) reg = crc32c_step_word(table, reg, words[w]);
  for (uint32_t b = 0; b < bytes % 4; ++b) reg = crc32c_step(table, reg, words[whole] >> (8 * b));
  return reg;
}

/// a(x) * b(x) mod P(x). Branch-free: 32 steps whatever the operands.
GRADGATE_HOST_DEVICE constexpr uint32_t crc32c_multiply(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (int i = 0; i < 32; ++i) {
    product ^= b & (0u - ((a >> (31 - i)) & 1u));          // the x^i term of a, times b
    b = (b >> 1) ^ (kCrc32cPolynomial & (0u - (b & 1u)));  // b *= x
  }
  return product;
}

/// The 64-bit carry-less product of two registers, scaled so that its high word is the register
/// of the product's terms x^0 .. x^31 and its low word that of x^32 .. x^63 (the part that
/// crc32c_multiply below reduces). Integer multiplies of operands with three-bit holes: each sum
/// of partial products stays under 16, so no carry reaches the next kept bit.
GRADGATE_HOST_DEVICE constexpr uint64_t crc32c_clmul(uint32_t a, uint32_t b) {
  constexpr uint32_t kEvery4 = 0x11111111u;
  uint64_t x[4] = {}, y[4] = {};
  for (int k = 0; k < 4; ++k) {
    x[k] = a & (kEvery4 << k);
    y[k] = b & (kEvery4 << k);
  }
  uint64_t product = 0;
  for (int k = 0; k < 4; ++k) {  // the bits of positions k mod 4: products x[i] y[j], i + j = k
    const uint64_t sum =
        (x[0] * y[k]) ^ (x[1] * y[(k + 3) % 4]) ^ (x[2] * y[(k + 2) % 4]) ^ (x[3] * y[(k + 1) % 4]);
    product |= sum & (0x1111111111111111ull << k);
  }
  return product << 1;  // reflected: bit 63 - d holds x^d
}

/// x^(8 * bytes) mod P: multiplying a register by it appends `bytes` zero bytes. O(log bytes).
GRADGATE_HOST_DEVICE constexpr uint32_t crc32c_zeros(uint64_t bytes) {
  uint32_t result = kCrc32cOne;
  uint32_t power = kCrc32cX8;
  for (; bytes != 0; bytes >>= 1) {
    if (bytes & 1u) result = crc32c_multiply(result, power);
    power = crc32c_multiply(power, power);
  }
  return result;
}

/// crc32c(A || B) from the finished checksums crc32c(A), crc32c(B) and |B|.
GRADGATE_HOST_DEVICE constexpr uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b,
                                                       uint64_t bytes_b) {
  return crc32c_multiply(crc_a, crc32c_zeros(bytes_b)) ^ crc_b;
}

/// The seed for a checksum to be finished in pieces: given crc32c of what comes first
/// (`crc_before`) and crc32c_zeros(body bytes) of the body that follows, xor-ing the body's
/// register from zero (reg0 above) into the seed gives crc32c of the whole.
GRADGATE_HOST_DEVICE constexpr uint32_t crc32c_seed(uint32_t crc_before, uint32_t body_zeros) {
  return ~crc32c_multiply(~crc_before, body_zeros);
}

/// Byte tables of "multiply by x^32" (feed four zero bytes): table[b][n] = (n << 8b) x^32 mod P.
/// A word costs four independent lookups where the byte table takes four dependent ones
/// (slicing by 4), and a multiply costs one crc32c_clmul and one such step.
struct alignas(16) Crc32cSlices {
  uint32_t table[4][256];
};

constexpr Crc32cSlices make_crc32c_slices() {
  Crc32cSlices slices{};
  const uint32_t x32 = crc32c_zeros(4);
  for (uint32_t b = 0; b < 4; ++b) {
    for (uint32_t n = 0; n < 256; ++n) slices.table[b][n] = crc32c_multiply(n << (8 * b), x32);
  }
  return slices;
}

/// The register after feeding the 4 bytes of the little-endian `word` (crc32c_step_word, sliced).
GRADGATE_HOST_DEVICE inline uint32_t crc32c_step_word(const Crc32cSlices& s, uint32_t reg,
                                                      uint32_t word) {
  reg ^= word;
  return s.table[0][reg & 0xFFu] ^ s.table[1][(reg >> 8) & 0xFFu] ^
         s.table[2][(reg >> 16) & 0xFFu] ^ s.table[3][reg >> 24];
}

/// crc32c_register with the sliced tables: whole words by slices, the last bytes one by one.
GRADGATE_HOST_DEVICE inline uint32_t crc32c_register(const Crc32cSlices& s, const uint32_t* words,
                                                     uint32_t bytes) {
  uint32_t reg = 0;
  const uint32_t whole = bytes / 4;
  for (uint32_t w = 0; w < whole; ++w) reg = crc32c_step_word(s, reg, words[w]);
  // table[3][n] = (n << 24) x^32 = n x^8: the byte table.
  for (uint32_t b = 0; b < bytes % 4; ++b)
    reg = crc32c_step(s.table[3], reg, words[whole] >> (8 * b));
  return reg;
}

/// crc32c_multiply with the sliced tables: a carry-less product and one word step to reduce it.
GRADGATE_HOST_DEVICE inline uint32_t crc32c_multiply(const Crc32cSlices& s, uint32_t a,
                                                     uint32_t b) {
  const uint64_t product = crc32c_clmul(a, b);
  return static_cast<uint32_t>(product >> 32) ^
         crc32c_step_word(s, static_cast<uint32_t>(product), 0);
}

/// crc32c_zeros by table: x^(8 bytes) for any bytes < 2^36 with three lookups and at most two
/// multiplies, or one lookup for bytes < 4096 (a tile of the GPU kernels).
struct Crc32cZeros {
  static constexpr int kBits = 12;
  static constexpr uint32_t kSize = 1u << kBits;
  /// level[l][k] = x^(8 k 2^(12 l)) mod P.
  uint32_t level[3][kSize];

  /// Digit `l` of `bytes` in base 2^12: x^(8 bytes) is the product of level[l][digit(bytes, l)]
  /// over l (an entry for a zero digit is 1).
  GRADGATE_HOST_DEVICE static constexpr uint32_t digit(uint64_t bytes, int l) {
    return static_cast<uint32_t>(bytes >> (kBits * l)) & (kSize - 1);
  }

  GRADGATE_HOST_DEVICE uint32_t operator()(uint64_t bytes) const {
    uint32_t power = level[0][digit(bytes, 0)];
    if (const auto mid = digit(bytes, 1)) power = crc32c_multiply(power, level[1][mid]);
    if (const auto high = digit(bytes, 2)) power = crc32c_multiply(power, level[2][high]);
    return power;
  }
};

constexpr Crc32cZeros make_crc32c_zeros() {
  Crc32cZeros zeros{};
  for (int l = 0; l < 3; ++l) {
    const uint32_t step = crc32c_zeros(uint64_t{1} << (Crc32cZeros::kBits * l));
    uint32_t power = kCrc32cOne;
    for (uint32_t k = 0; k < Crc32cZeros::kSize; ++k) {
      zeros.level[l][k] = power;
      power = crc32c_multiply(power, step);
    }
  }
  return zeros;
}

}  // namespace gradgate::kernels
