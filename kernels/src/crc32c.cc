#include "gradgate/kernels/crc32c.h"

#include <array>
#include <cstring>

#include "gradgate/kernels/crc32c_combine.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace gradgate::kernels {
namespace {

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) table[i] = crc32c_table_entry(i);
  return table;
}
constexpr auto kTable = make_table();

uint32_t extend_table(uint32_t crc, const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) crc = crc32c_step(kTable.data(), crc, p[i]);
  return crc;
}

#if defined(__x86_64__)
// The crc32 instruction has a latency of three cycles and a throughput of one, so three
// independent streams over adjacent blocks run three times faster than one. The CRC of the whole
// is then the first stream's register carried over the other two blocks (multiplied by x^(8B) mod
// P, the effect of B zero bytes, see crc32c_combine.h) xor the others.
constexpr size_t kStreamBlock = 8192;

// Byte tables of the map "append `bytes` zero bytes" on a raw CRC register: multiplying by a
// constant is linear, so the images of the four bytes of the register xor together.
struct ZerosShift {
  std::array<std::array<uint32_t, 256>, 4> table{};

  explicit ZerosShift(size_t bytes) {
    const uint32_t power = crc32c_zeros(bytes);
    for (uint32_t n = 0; n < 256; ++n) {
      for (int byte = 0; byte < 4; ++byte) table[byte][n] = crc32c_multiply(n << (8 * byte), power);
    }
  }
  uint32_t operator()(uint32_t crc) const {
    return table[0][crc & 0xFF] ^ table[1][(crc >> 8) & 0xFF] ^ table[2][(crc >> 16) & 0xFF] ^
           table[3][crc >> 24];
  }
};

__attribute__((target("sse4.2"))) uint32_t extend_sse42(uint32_t crc, const unsigned char* p,
                                                        size_t n) {
  static const ZerosShift over_block(kStreamBlock);
  for (; n >= 3 * kStreamBlock; n -= 3 * kStreamBlock, p += 3 * kStreamBlock) {
    uint64_t c0 = crc, c1 = 0, c2 = 0;
    for (size_t i = 0; i < kStreamBlock; i += 8) {
      uint64_t w0, w1, w2;
      std::memcpy(&w0, p + i, 8);
      std::memcpy(&w1, p + kStreamBlock + i, 8);
      std::memcpy(&w2, p + 2 * kStreamBlock + i, 8);
      c0 = _mm_crc32_u64(c0, w0);
      c1 = _mm_crc32_u64(c1, w1);
      c2 = _mm_crc32_u64(c2, w2);
    }
    crc = over_block(over_block(static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c1)) ^
          static_cast<uint32_t>(c2);
  }
  uint64_t c = crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; n > 0; --n, ++p) c32 = _mm_crc32_u8(c32, *p);
  return c32;
}
#endif

}  // namespace

uint32_t crc32c_extend(uint32_t crc, std::span<const std::byte> data) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  crc = ~crc;
#if defined(__x86_64__)
  static const bool has_sse42 = __builtin_cpu_supports("sse4.2");
  crc = has_sse42 ? extend_sse42(crc, p, data.size()) : extend_table(crc, p, data.size());
#else
  crc = extend_table(crc, p, data.size());
#endif
  return ~crc;
}

}  // namespace gradgate::kernels
