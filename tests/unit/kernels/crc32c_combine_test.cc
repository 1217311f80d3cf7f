// The CRC32C algebra of crc32c_combine.h that the CUDA kernels' frame checksum rests on, and the
// kernels' tiled checksum (element_mirror.h) against the frame's CRC.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "element_mirror.h"
#include "gradgate/kernels/crc32c.h"
#include "gradgate/kernels/crc32c_combine.h"
#include "gradgate/kernels/frame.h"
#include "gradgate/kernels/wire_io.h"

namespace gradgate::kernels {
namespace {

using mirror::header_for;
using mirror::kSignTiles;
using mirror::kWideTiles;
using mirror::slices_table;
using mirror::tiled_frame_crc;
using mirror::TileShape;
using mirror::zeros_table;
using test_util::Bytes;

const uint32_t* byte_table() {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) t[i] = crc32c_table_entry(i);
    return t;
  }();
  return table.data();
}

TEST(Crc32cCombineTest, TableMatchesTheCpuChecksum) {
  for (uint32_t byte = 0; byte < 256; ++byte) {
    const auto b = static_cast<std::byte>(byte);
    // crc32c of one byte is ~step(~0, byte).
    ASSERT_EQ(crc32c(std::span(&b, 1)), ~crc32c_step(byte_table(), ~0u, byte)) << byte;
  }
}

TEST(Crc32cCombineTest, WordStepIsFourByteSteps) {
  std::mt19937 rng(1);
  for (int trial = 0; trial < 1000; ++trial) {
    const uint32_t reg = rng(), word = rng();
    uint32_t bytewise = reg;
    for (int b = 0; b < 4; ++b) bytewise = crc32c_step(byte_table(), bytewise, word >> (8 * b));
    ASSERT_EQ(crc32c_step_word(byte_table(), reg, word), bytewise);
  }
}

TEST(Crc32cCombineTest, MultiplyIsAFieldProduct) {
  std::mt19937 rng(2);
  for (int trial = 0; trial < 2000; ++trial) {
    const uint32_t a = rng(), b = rng(), c = rng();
    ASSERT_EQ(crc32c_multiply(a, kCrc32cOne), a);
    ASSERT_EQ(crc32c_multiply(a, b), crc32c_multiply(b, a));
    ASSERT_EQ(crc32c_multiply(a, b ^ c), crc32c_multiply(a, b) ^ crc32c_multiply(a, c));
    ASSERT_EQ(crc32c_multiply(crc32c_multiply(a, b), c), crc32c_multiply(a, crc32c_multiply(b, c)));
  }
  EXPECT_EQ(crc32c_multiply(0, 0x12345678u), 0u);
}

TEST(Crc32cCombineTest, ZerosAppendZeroBytes) {
  std::mt19937 rng(3);
  EXPECT_EQ(crc32c_zeros(0), kCrc32cOne);
  EXPECT_EQ(crc32c_zeros(1), kCrc32cX8);
  for (uint64_t bytes : {1ull, 2ull, 3ull, 7ull, 100ull, 4096ull, 12345ull}) {
    const uint32_t reg = rng();
    uint32_t fed = reg;
    for (uint64_t i = 0; i < bytes; ++i) fed = crc32c_step(byte_table(), fed, 0);
    ASSERT_EQ(crc32c_multiply(reg, crc32c_zeros(bytes)), fed) << bytes;
  }
  for (int trial = 0; trial < 200; ++trial) {
    const uint64_t a = rng() % 100000, b = (uint64_t{rng()} << 3) ^ rng();
    ASSERT_EQ(crc32c_zeros(a + b), crc32c_multiply(crc32c_zeros(a), crc32c_zeros(b)));
  }
}

TEST(Crc32cCombineTest, ZerosTableMatchesTheDirectPower) {
  const Crc32cZeros& zeros = zeros_table();
  std::mt19937_64 rng(4);
  std::vector<uint64_t> cases = {
      0, 1, 4095, 4096, 4097, (1ull << 24) - 1, 1ull << 24, (1ull << 36) - 1, 3ull << 32};
  for (int trial = 0; trial < 300; ++trial) cases.push_back(rng() >> (28 + trial % 36));
  for (uint64_t bytes : cases) ASSERT_EQ(zeros(bytes), crc32c_zeros(bytes)) << bytes;
}

TEST(Crc32cCombineTest, CombineJoinsChecksums) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    Bytes data(rng() % 3000);
    for (auto& b : data) b = static_cast<std::byte>(rng());
    const size_t split = data.empty() ? 0 : rng() % (data.size() + 1);
    const auto all = std::span<const std::byte>(data);
    ASSERT_EQ(
        crc32c_combine(crc32c(all.first(split)), crc32c(all.subspan(split)), data.size() - split),
        crc32c(all));
  }
}

TEST(Crc32cCombineTest, PiecesFromZeroShiftedToTheEndXorToTheRegister) {
  // reg0(A || B || C) = reg0(A) x^(8|BC|) ^ reg0(B) x^(8|C|) ^ reg0(C), in any xor order.
  std::mt19937 rng(6);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<uint32_t> words(1 + rng() % 300);
    for (auto& w : words) w = rng();
    const auto bytes = static_cast<uint32_t>(words.size() * 4 - rng() % 4);
    const uint32_t whole = crc32c_register(byte_table(), words.data(), bytes);
    const uint32_t cut1 = 4 * (rng() % (bytes / 4 + 1)),
                   cut2 = cut1 + 4 * (rng() % ((bytes - cut1) / 4 + 1));
    const uint32_t a = crc32c_register(byte_table(), words.data(), cut1);
    const uint32_t b = crc32c_register(byte_table(), words.data() + cut1 / 4, cut2 - cut1);
    const uint32_t c = crc32c_register(byte_table(), words.data() + cut2 / 4, bytes - cut2);
    ASSERT_EQ(crc32c_multiply(c, kCrc32cOne) ^ crc32c_multiply(a, crc32c_zeros(bytes - cut1)) ^
                  crc32c_multiply(b, crc32c_zeros(bytes - cut2)),
              whole);
  }
}

TEST(Crc32cCombineTest, SlicesStepAWordAtATime) {
  const Crc32cSlices& slices = slices_table();
  for (uint32_t n = 0; n < 256; ++n) ASSERT_EQ(slices.table[3][n], crc32c_table_entry(n)) << n;
  std::mt19937 rng(8);
  for (int trial = 0; trial < 2000; ++trial) {
    const uint32_t reg = rng(), word = rng();
    ASSERT_EQ(crc32c_step_word(slices, reg, word), crc32c_step_word(byte_table(), reg, word));
  }
  for (uint32_t bytes = 0; bytes <= 70; ++bytes) {
    std::vector<uint32_t> words(bytes / 4 + 1);
    for (auto& w : words) w = rng();
    ASSERT_EQ(crc32c_register(slices, words.data(), bytes),
              crc32c_register(byte_table(), words.data(), bytes))
        << bytes;
  }
}

TEST(Crc32cCombineTest, ClmulIsTheCarrylessProduct) {
  // Schoolbook carry-less product, then the reflected scaling of crc32c_clmul.
  const auto schoolbook = [](uint32_t a, uint32_t b) {
    uint64_t product = 0;
    for (int i = 0; i < 32; ++i) {
      if ((a >> i) & 1u) product ^= uint64_t{b} << i;
    }
    return product << 1;
  };
  std::mt19937 rng(9);
  std::vector<std::pair<uint32_t, uint32_t>> cases = {
      {0, 0}, {~0u, ~0u}, {~0u, 1}, {kCrc32cOne, kCrc32cOne}, {0x11111111u, ~0u}};
  for (int trial = 0; trial < 5000; ++trial) cases.emplace_back(rng(), rng());
  for (int sparse = 0; sparse < 2000; ++sparse) cases.emplace_back(rng() & rng(), rng() | rng());
  for (const auto& [a, b] : cases) {
    ASSERT_EQ(crc32c_clmul(a, b), schoolbook(a, b)) << a << " " << b;
    ASSERT_EQ(crc32c_multiply(slices_table(), a, b), crc32c_multiply(a, b)) << a << " " << b;
  }
  static_assert(crc32c_clmul(~0u, ~0u) == (0x5555555555555555ull & ~(1ull << 63)) << 1);
}

TEST(Crc32cCombineTest, ZerosDigitsMultiplyToThePower) {
  const Crc32cZeros& zeros = zeros_table();
  std::mt19937_64 rng(10);
  std::vector<uint64_t> cases = {0, 1, 4095, 4096, (1ull << 24) + 1, (1ull << 36) - 1};
  for (int trial = 0; trial < 300; ++trial) cases.push_back(rng() >> (28 + trial % 36));
  for (uint64_t bytes : cases) {
    uint32_t power = kCrc32cOne;
    for (int l = 0; l < 3; ++l) {
      power = crc32c_multiply(slices_table(), power, zeros.level[l][Crc32cZeros::digit(bytes, l)]);
    }
    ASSERT_EQ(power, crc32c_zeros(bytes)) << bytes;
  }
}

TEST(Crc32cCombineTest, TiledChecksumOfAnyShapeIsTheFrameCrc) {
  // Any tile and segment shape gives the frame's CRC (the kernels' two shapes included), with or
  // without a prefix between header and body.
  std::mt19937 rng(7);
  for (size_t payload : {1, 3, 4, 5, 511, 512, 513, 4095, 4096, 4097, 40000}) {
    for (size_t prefix : {0, 4}) {
      if (prefix >= payload) continue;
      Bytes frame(kFrameHeaderBytes + payload);
      for (auto& b : frame) b = static_cast<std::byte>(rng());
      FrameHeader h = header_for(CodecId::kQsgd, 5, 9, payload);
      seal_frame(h, frame);
      const uint32_t expected = wire::load<uint32_t>(frame.data() + 44);
      for (TileShape shape : {kWideTiles, kSignTiles, TileShape{8}, TileShape{16}}) {
        ASSERT_EQ(tiled_frame_crc(frame, prefix, shape), expected)
            << "payload " << payload << " prefix " << prefix << " segment " << shape.segment_bytes;
      }
    }
  }
}

}  // namespace
}  // namespace gradgate::kernels
