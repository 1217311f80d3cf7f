// The CUDA codecs' logic, checked on the CPU: the CRC32C algebra of crc32c_combine.h, and a
// host mirror of every element-wise kernel (the same rules:: calls over the same tiles, threads,
// Philox blocks and checksum segments) that must reproduce the CPU codecs' frames and residuals
// byte for byte, over random data with NaN, infinities, saturating values, denormals and zeros.
// A GPU kernel that follows its mirror produces the CPU's frames; tests/unit/kernels_cuda checks
// the kernels themselves where a GPU is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "codec_data.h"
#include "codec_test_util.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/crc32c.h"
#include "gradgate/kernels/crc32c_combine.h"
#include "gradgate/kernels/element_rules.h"
#include "gradgate/kernels/frame.h"
#include "gradgate/kernels/half.h"
#include "gradgate/kernels/philox.h"
#include "gradgate/kernels/wire_io.h"

namespace gradgate::kernels {
namespace {

using test_util::Bytes;

// ---- inputs -----------------------------------------------------------------------------------

using test_util::make_finite_values;
using test_util::make_values;
using test_util::same_bits;
using test_util::same_bytes;

const std::vector<size_t> kSizes = {1,    7,    8,    63,   64,   65,   1000,  1023,
                                    1025, 2049, 4095, 4096, 4097, 8200, 100003};

uint32_t bits_of(float v) { return std::bit_cast<uint32_t>(v); }

// ---- the kernels' checksum, mirrored ----------------------------------------------------------

const Crc32cZeros& zeros_table() {
  static const auto table = std::make_unique<Crc32cZeros>(make_crc32c_zeros());
  return *table;
}

const Crc32cSlices& slices_table() {
  static const auto table = std::make_unique<Crc32cSlices>(make_crc32c_slices());
  return *table;
}

const uint32_t* byte_table() {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) t[i] = crc32c_table_entry(i);
    return t;
  }();
  return table.data();
}

// A kernel's tiles: kTileThreads (128) threads, each checksumming `segment_bytes` of a tile.
struct TileShape {
  uint32_t segment_bytes;
  uint32_t tile_bytes() const { return 128 * segment_bytes; }
};
constexpr TileShape kWideTiles{32};  // none, fp16, bf16, qsgd and their sums
constexpr TileShape kSignTiles{4};

// The frame's CRC32C as launch_seal_header and TileStage::fold_crc compute it: the seed from the
// header and `prefix_bytes` of payload, then every segment of every tile, shifted to the end.
uint32_t tiled_frame_crc(std::span<const std::byte> frame, size_t prefix_bytes, TileShape shape) {
  const auto prefix = frame.subspan(kFrameHeaderBytes, prefix_bytes);
  const auto body = frame.subspan(kFrameHeaderBytes + prefix_bytes);
  const uint32_t before = crc32c_extend(crc32c(frame.first(44)), prefix);
  uint32_t crc = crc32c_seed(before, crc32c_zeros(body.size()));
  const Crc32cZeros& zeros = zeros_table();
  for (size_t offset = 0; offset < body.size(); offset += shape.tile_bytes()) {
    const auto tile_bytes =
        static_cast<uint32_t>(std::min<size_t>(shape.tile_bytes(), body.size() - offset));
    uint32_t tile = 0;
    for (uint32_t begin = 0; begin < tile_bytes; begin += shape.segment_bytes) {
      const uint32_t end = std::min(begin + shape.segment_bytes, tile_bytes);
      std::vector<uint32_t> words((end - begin + 3) / 4);
      std::memcpy(words.data(), body.data() + offset + begin, end - begin);
      const uint32_t reg = crc32c_register(slices_table(), words.data(), end - begin);
      tile ^= crc32c_multiply(slices_table(), reg, zeros.level[0][tile_bytes - end]);
    }
    const uint64_t after = body.size() - offset - tile_bytes;
    for (int l = 0; l < 3; ++l) {
      tile = crc32c_multiply(slices_table(), tile, zeros.level[l][Crc32cZeros::digit(after, l)]);
    }
    crc ^= tile;
  }
  return crc;
}

// ---- the kernels' element work, mirrored ------------------------------------------------------

constexpr uint32_t kJob = 3, kTensor = 7, kPolicy = 2;

FrameHeader header_for(CodecId codec, size_t n, uint64_t step, size_t payload, uint32_t param = 0) {
  FrameHeader h;
  h.codec = codec;
  h.tensor_id = kTensor;
  h.job_id = kJob;
  h.step = step;
  h.element_count = n;
  h.policy_version = kPolicy;
  h.param = param;
  h.payload_bytes = static_cast<uint32_t>(payload);
  return h;
}

StepContext context_for(uint64_t step, uint32_t worker = 1, float agreed_scale = 0.0f) {
  StepContext ctx;
  ctx.step = step;
  ctx.policy_version = kPolicy;
  ctx.worker = worker;
  ctx.job_seed = 0x5EEDull;
  ctx.agreed_scale = agreed_scale;
  return ctx;
}

// A frame: header, then `payload` (written by the caller), then the tiled CRC.
struct MirrorFrame {
  Bytes bytes;
  size_t bad = 0;

  MirrorFrame(const FrameHeader& h) : bytes(kFrameHeaderBytes + h.payload_bytes) {
    write_frame_header(h, bytes);
  }
  std::byte* payload() { return bytes.data() + kFrameHeaderBytes; }
  void seal(size_t prefix_bytes, TileShape shape) {
    wire::store<uint32_t>(bytes.data() + 44, tiled_frame_crc(bytes, prefix_bytes, shape));
  }
};

// none_write_kernel: out = a (+ b).
MirrorFrame mirror_none(const FrameHeader& h, std::span<const float> a, const float* b) {
  MirrorFrame f(h);
  for (size_t i = 0; i < a.size(); ++i) {
    float v = a[i];
    f.bad += !rules::finite(v);
    if (b) {
      f.bad += !rules::finite(b[i]);
      v += b[i];
    }
    wire::store<float>(f.payload() + 4 * i, v);
  }
  f.seal(0, kWideTiles);
  return f;
}

// half_encode_kernel, then half_restore_kernel where the encode failed.
template <typename Format>
MirrorFrame mirror_half_encode(const FrameHeader& h, std::span<const float> g, float* e) {
  MirrorFrame f(h);
  std::vector<uint16_t> sent(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const float residual = e ? e[i] : 0.0f;
    const float v = rules::ef_value(g[i], e ? &residual : nullptr);
    sent[i] = rules::half_encode<Format>(v);
    wire::store<uint16_t>(f.payload() + 2 * i, sent[i]);
    if (e) e[i] = rules::residual_after(v, Format::decode(sent[i]), residual);
    f.bad += !rules::half_sendable<Format>(v, e != nullptr);
  }
  if (f.bad != 0 && e) {
    for (size_t i = 0; i < g.size(); ++i) {
      e[i] = rules::restored_residual(g[i], 0.0f + Format::decode(sent[i]), e[i]);
    }
  }
  f.seal(0, kWideTiles);
  return f;
}

// half_sum_kernel: counts bad values of a, b and the sum together.
template <typename Format>
MirrorFrame mirror_half_sum(const FrameHeader& h, const uint16_t* a, const uint16_t* b) {
  MirrorFrame f(h);
  for (size_t i = 0; i < h.element_count; ++i) {
    const uint16_t sum = rules::half_sum<Format>(a[i], b[i]);
    wire::store<uint16_t>(f.payload() + 2 * i, sum);
    f.bad += !rules::half_finite<Format>(a[i]) + !rules::half_finite<Format>(b[i]) +
             !rules::half_finite<Format>(sum);
  }
  f.seal(0, kWideTiles);
  return f;
}

// abs_stats_kernel (and abs_sum_kernel): the count of bad v, the largest kept |v|, the ordered sum.
struct Stats {
  size_t bad = 0;
  float max = 0.0f;
  double sum = 0.0;
};

Stats mirror_abs_stats(std::span<const float> g, const float* e) {
  Stats s;
  const size_t n = g.size();
  const size_t whole = n & ~size_t{7};
  std::vector<double> block_sums;
  for (size_t first = 0; first < n; first += rules::kSumBlock) {
    const size_t count = std::min<size_t>(rules::kSumBlock, n - first);
    std::vector<float> kept(count);
    for (size_t j = 0; j < count; ++j) {
      const float v = rules::ef_value(g[first + j], e ? e + first + j : nullptr);
      kept[j] = rules::kept_magnitude(v);
      s.bad += !rules::finite(v);
      s.max = std::max(s.max, kept[j]);
    }
    const size_t summed = first < whole ? std::min(whole - first, count) : 0;
    double block = 0.0;
    for (size_t lane = 0; lane < rules::kSumLanes; ++lane) {
      float lane_sum = 0.0f;
      for (size_t j = lane; j < summed; j += rules::kSumLanes) lane_sum += kept[j];
      block += lane_sum;
    }
    block_sums.push_back(block);
  }
  for (double block : block_sums) s.sum += block;
  for (size_t i = whole; i < n; ++i) {
    s.sum += rules::kept_magnitude(rules::ef_value(g[i], e ? e + i : nullptr));
  }
  return s;
}

// qsgd_encode_kernel over its tiles, threads and Philox blocks, then qsgd_restore_kernel where
// the encode failed.
template <typename Int>
MirrorFrame mirror_qsgd_encode(const FrameHeader& h, std::span<const float> g, float* e,
                               float scale, int levels, const rules::QsgdKey& key) {
  MirrorFrame f(h);
  wire::store<float>(f.payload(), scale);
  auto* out = reinterpret_cast<Int*>(f.payload() + 4);
  const rules::QsgdGrid grid = rules::qsgd_grid(scale, levels);
  const uint64_t n = g.size();
  const uint32_t tile_elements = kWideTiles.tile_bytes() / sizeof(Int);
  for (uint64_t first = 0; first < n; first += tile_elements) {
    const auto count = static_cast<uint32_t>(std::min<uint64_t>(tile_elements, n - first));
    for (uint32_t thread = 0; thread < 128; ++thread) {
      const uint32_t lane = thread % 8;
      for (uint32_t base = thread / 8 * 64; base < count; base += 1024) {
        const Philox4 bits = rules::qsgd_bits(philox_block(first + base + lane), key);
        for (uint32_t j = base + lane; j < base + 64 && j < count; j += 8) {
          const uint64_t i = first + j;
          const float residual = e ? e[i] : 0.0f;
          const float v = rules::ef_value(g[i], e ? &residual : nullptr);
          const int32_t level = rules::qsgd_level(v, rules::qsgd_uniform(bits, i), grid);
          out[i] = static_cast<Int>(level);
          if (e) e[i] = rules::residual_after(v, rules::qsgd_value(level, grid.to_value), residual);
          f.bad += !rules::finite(v);
        }
      }
    }
  }
  if (f.bad != 0 && e) {
    for (size_t i = 0; i < n; ++i) {
      e[i] = rules::restored_residual(g[i], 0.0f + rules::qsgd_value(out[i], grid.to_value), e[i]);
    }
  }
  f.seal(4, kWideTiles);
  return f;
}

// qsgd_sum_kernel: the scale of a, levels added.
template <typename Int>
MirrorFrame mirror_qsgd_sum(const FrameHeader& h, const std::byte* a, const std::byte* b) {
  MirrorFrame f(h);
  std::memcpy(f.payload(), a, 4);
  for (size_t i = 0; i < h.element_count; ++i) {
    const Int sum = rules::qsgd_sum(wire::load<Int>(a + 4 + i * sizeof(Int)),
                                    wire::load<Int>(b + 4 + i * sizeof(Int)));
    wire::store<Int>(f.payload() + 4 + i * sizeof(Int), sum);
  }
  f.seal(4, kWideTiles);
  return f;
}

// sign_encode_kernel: warps turn 32 elements into one little-endian bitmap word.
MirrorFrame mirror_sign_encode(const FrameHeader& h, std::span<const float> g, float* e,
                               float scale) {
  MirrorFrame f(h);
  wire::store<float>(f.payload(), scale);
  std::byte* bitmap = f.payload() + 4;
  const uint64_t n = g.size();
  const uint64_t bitmap_bytes = (n + 7) / 8;
  for (uint64_t word = 0; word * 32 < n; ++word) {
    uint32_t value = 0;
    for (uint32_t lane = 0; lane < 32 && word * 32 + lane < n; ++lane) {
      const uint64_t i = word * 32 + lane;
      const float residual = e ? e[i] : 0.0f;
      const float v = rules::ef_value(g[i], e ? &residual : nullptr);
      const bool bit = rules::sign_bit(v);
      value |= static_cast<uint32_t>(bit) << lane;
      if (e) e[i] = rules::residual_after(v, rules::sign_value(bit, scale), residual);
    }
    for (uint64_t b = 0; b < 4 && word * 4 + b < bitmap_bytes; ++b) {
      bitmap[word * 4 + b] = static_cast<std::byte>(value >> (8 * b));
    }
  }
  f.seal(4, kSignTiles);
  return f;
}

// The decode kernels: out (= 0 when overwriting) + the decoded element.
template <typename Decode>
std::vector<float> mirror_decode(std::vector<float> out, bool overwrite, Decode decode) {
  for (size_t i = 0; i < out.size(); ++i) out[i] = (overwrite ? 0.0f : out[i]) + decode(i);
  return out;
}

// ---- the CPU codecs ---------------------------------------------------------------------------

struct CpuCodec {
  std::unique_ptr<Codec> codec;
  std::unique_ptr<Stream> stream;

  explicit CpuCodec(const std::string& spec, size_t n) {
    codec = make_cpu_codec(parse_codec_spec(spec).value()).value();
    stream = codec->make_stream(test_util::matrix_desc(1, n, kJob, kTensor)).value();
  }
  std::span<float> residual() { return stream->residual(); }
  // The frame, or an empty buffer when the encode failed.
  Bytes encode(std::span<const float> g, const StepContext& ctx) {
    auto frame = test_util::encode_frame(*codec, 0, ctx, g, *stream);
    return frame.ok() ? *frame : Bytes{};
  }
};

// ---- CRC32C algebra ---------------------------------------------------------------------------

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

// ---- per-element rules and kernels against the CPU codecs -------------------------------------

TEST(ElementRulesTest, HalfEncodeSaturatesAndKeepsNaN) {
  EXPECT_EQ(rules::half_encode<rules::Fp16>(70000.0f), 0x7BFFu);
  EXPECT_EQ(rules::half_encode<rules::Fp16>(-1e30f), 0xFBFFu);
  EXPECT_EQ(rules::half_encode<rules::Fp16>(std::numeric_limits<float>::infinity()), 0x7BFFu);
  EXPECT_FALSE(rules::half_finite<rules::Fp16>(
      rules::half_encode<rules::Fp16>(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(rules::half_encode<rules::Bf16>(std::numeric_limits<float>::infinity()), 0x7F7Fu);
  EXPECT_FALSE(rules::half_finite<rules::Fp16>(rules::half_sum<rules::Fp16>(0x7BFF, 0x7BFF)));
  float e = 5.0f;
  EXPECT_EQ(rules::residual_after(std::numeric_limits<float>::infinity(), 1.0f, e), 5.0f);
  EXPECT_EQ(rules::residual_after(3.0f, 1.0f, e), 2.0f);
}

TEST(ElementRulesTest, QsgdLevelRoundsStochasticallyAndClamps) {
  const rules::QsgdGrid grid = rules::qsgd_grid(2.0f, 15);  // a level is 2/15
  EXPECT_EQ(rules::qsgd_level(0.2f, 0.0f, grid), 1);        // 1.5 levels, u = 0: down
  EXPECT_EQ(rules::qsgd_level(0.2f, 0.6f, grid), 2);        // u > 0.5: up
  EXPECT_EQ(rules::qsgd_level(-0.2f, 0.6f, grid), -2);
  EXPECT_EQ(rules::qsgd_level(2.0f, 0.9999f, grid), 15);  // clamped at the top level
  EXPECT_EQ(rules::qsgd_level(std::numeric_limits<float>::quiet_NaN(), 0.5f, grid), 0);
  EXPECT_EQ(rules::qsgd_level(1.0f, 0.5f, rules::qsgd_grid(0.0f, 15)), 0);  // zero scale
  // A scale whose levels / scale overflows: level 0 everywhere, not 0 * inf = NaN cast to int.
  const rules::QsgdGrid tiny = rules::qsgd_grid(1e-39f, 32767);
  EXPECT_EQ(rules::qsgd_level(0.0f, 0.5f, tiny), 0);
  EXPECT_EQ(rules::qsgd_level(-1e-39f, 0.5f, tiny), 0);
  EXPECT_EQ(rules::qsgd_sum<int8_t>(100, 100), static_cast<int8_t>(-56));  // wraps, unchecked
}

TEST(ElementRulesTest, QsgdUniformIsTheBlockWordHalf) {
  const rules::QsgdKey key = rules::qsgd_key(0x5EED, 1, kTensor, 9);
  for (uint64_t i : {0ull, 7ull, 8ull, 63ull, 64ull, 1000ull, (1ull << 33) + 5}) {
    const Philox4 bits = rules::qsgd_bits(philox_block(i), key);
    EXPECT_EQ(
        rules::qsgd_uniform(bits, i),
        static_cast<float>((bits.v[(i >> 4) & 3] >> (16 * ((i >> 3) & 1))) & 0xFFFF) / 65536.0f);
  }
}

class NoneMirrorTest : public ::testing::TestWithParam<size_t> {};

TEST_P(NoneMirrorTest, EncodeSumAndDecodeMatchTheCpuCodec) {
  const size_t n = GetParam();
  CpuCodec cpu("none", n);
  const auto a = make_finite_values(n, 11);
  const auto b = make_finite_values(n, 12);
  const Bytes fa = cpu.encode(a, context_for(4));
  const Bytes fb = cpu.encode(b, context_for(4));
  const FrameHeader h = header_for(CodecId::kNone, n, 4, 4 * n);
  EXPECT_TRUE(same_bytes(fa, mirror_none(h, a, nullptr).bytes));

  auto sum = test_util::add_frame_bytes(*cpu.codec, fa, fb);
  ASSERT_TRUE(sum.ok());
  const MirrorFrame mirrored_sum = mirror_none(h, a, b.data());
  EXPECT_EQ(mirrored_sum.bad, 0u);
  EXPECT_TRUE(same_bytes(*sum, mirrored_sum.bytes));

  const auto view = parse_frame(fa).value();
  std::vector<float> acc = make_finite_values(n, 13);
  std::vector<float> expected = acc;
  ASSERT_TRUE(cpu.codec->decode_accumulate(view, nullptr, expected).ok());
  EXPECT_TRUE(same_bits(expected, mirror_decode(acc, false, [&](size_t i) { return a[i]; })));

  const auto bad = make_values(n, 14, true);
  const size_t bad_count =
      std::count_if(bad.begin(), bad.end(), [](float v) { return !std::isfinite(v); });
  EXPECT_EQ(mirror_none(h, bad, nullptr).bad, bad_count);
  EXPECT_EQ(cpu.encode(bad, context_for(5)).empty(), bad_count != 0);
}

INSTANTIATE_TEST_SUITE_P(Sizes, NoneMirrorTest, ::testing::ValuesIn(kSizes));

struct HalfCase {
  bool bf16;
  bool error_feedback;
  size_t n;
};

class HalfMirrorTest : public ::testing::TestWithParam<HalfCase> {
 protected:
  template <typename Format>
  void run() {
    const auto [bf16, ef, n] = GetParam();
    const CodecId id = bf16 ? CodecId::kBf16 : CodecId::kFp16;
    CpuCodec cpu(std::string(codec_name(id)) + (ef ? "" : ":ef=0"), n);
    std::vector<float> residual(ef ? n : 0, 0.0f);
    float* e = ef ? residual.data() : nullptr;
    for (uint64_t step = 0; step < 6; ++step) {
      // Steps 2 and 4 carry NaN and infinities: the encode fails and the residual is restored.
      const bool specials = step == 2 || step == 4;
      const auto g = specials ? make_values(n, 100 + step, true)
                              : make_finite_values(n, 100 + step, ef || bf16 ? 1e30f : kFp16Max);
      const Bytes cpu_frame = cpu.encode(g, context_for(step));
      const MirrorFrame mirrored = mirror_half_encode<Format>(header_for(id, n, step, 2 * n), g, e);
      ASSERT_EQ(cpu_frame.empty(), mirrored.bad != 0) << "step " << step;
      ASSERT_TRUE(specials || !cpu_frame.empty()) << "finite values fail at step " << step;
      if (!cpu_frame.empty()) {
        ASSERT_TRUE(same_bytes(cpu_frame, mirrored.bytes)) << "step " << step;
      }
      ASSERT_TRUE(same_bits(cpu.residual(), residual)) << "step " << step;
    }
    check_sum_and_decode<Format>(cpu, id);
  }

  template <typename Format>
  void check_sum_and_decode(CpuCodec& cpu, CodecId id) {
    const size_t n = GetParam().n;
    const FrameHeader h = header_for(id, n, 9, 2 * n);
    // Large values so that some sums overflow fp16 (and then the CPU refuses the sum).
    const auto a = make_values(n, 200, false, 30000.0f);
    const auto b = make_values(n, 201, false, 30000.0f);
    const MirrorFrame fa = mirror_half_encode<Format>(h, a, nullptr);
    const MirrorFrame fb = mirror_half_encode<Format>(h, b, nullptr);
    const auto* va = reinterpret_cast<const uint16_t*>(fa.bytes.data() + kFrameHeaderBytes);
    const auto* vb = reinterpret_cast<const uint16_t*>(fb.bytes.data() + kFrameHeaderBytes);
    const MirrorFrame sum = mirror_half_sum<Format>(h, va, vb);
    auto cpu_sum = test_util::add_frame_bytes(*cpu.codec, fa.bytes, fb.bytes);
    ASSERT_EQ(cpu_sum.ok(), sum.bad == 0) << cpu_sum.status().to_string();
    if (cpu_sum.ok()) {
      EXPECT_TRUE(same_bytes(*cpu_sum, sum.bytes));
    } else {
      EXPECT_EQ(cpu_sum.status().code(), ErrorCode::kNonFiniteGradient);
    }

    const auto view = parse_frame(fa.bytes).value();
    for (bool overwrite : {false, true}) {
      std::vector<float> acc = make_finite_values(n, 202);
      std::vector<float> expected = acc;
      const Status status = overwrite ? cpu.codec->decode(view, nullptr, expected)
                                      : cpu.codec->decode_accumulate(view, nullptr, expected);
      ASSERT_TRUE(status.ok()) << status.to_string();
      EXPECT_TRUE(same_bits(expected, mirror_decode(acc, overwrite, [&](size_t i) {
                              return Format::decode(va[i]);
                            })));
    }
  }
};

TEST_P(HalfMirrorTest, FramesResidualsSumsAndDecodesMatchTheCpuCodec) {
  if (GetParam().bf16) {
    run<rules::Bf16>();
  } else {
    run<rules::Fp16>();
  }
}

std::vector<HalfCase> half_cases() {
  std::vector<HalfCase> cases;
  for (bool bf16 : {false, true}) {
    for (bool ef : {true, false}) {
      for (size_t n : kSizes) cases.push_back({bf16, ef, n});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, HalfMirrorTest, ::testing::ValuesIn(half_cases()),
                         [](const auto& test) {
                           return std::string(test.param.bf16 ? "bf16" : "fp16") +
                                  (test.param.error_feedback ? "_ef_" : "_noef_") +
                                  std::to_string(test.param.n);
                         });

struct QsgdCase {
  int bits;
  int workers;
  bool agreed;  // an agreed scale from the step context, else the local one
  size_t n;
};

class QsgdMirrorTest : public ::testing::TestWithParam<QsgdCase> {
 protected:
  template <typename Int>
  void run() {
    const auto [bits, workers, agreed, n] = GetParam();
    const std::string spec =
        "qsgd:bits=" + std::to_string(bits) + ",workers=" + std::to_string(workers);
    CpuCodec cpu(spec, n);
    const int headroom = qsgd_headroom_bits(workers);
    ASSERT_EQ(qsgd_level_bytes(bits, headroom), sizeof(Int));
    const int levels = (1 << bits) - 1;
    const uint32_t param =
        static_cast<uint32_t>(bits) | static_cast<uint32_t>(headroom) << 8 | 1u << 16;
    std::vector<float> residual(n, 0.0f);
    Bytes last;
    for (uint64_t step = 0; step < 6; ++step) {
      const bool specials = step == 3;
      const auto g =
          specials ? make_values(n, 300 + step, true) : make_finite_values(n, 300 + step);
      const StepContext ctx = context_for(step, 2, agreed ? 4.0f : 0.0f);
      const Stats stats = mirror_abs_stats(g, residual.data());
      ASSERT_EQ(bits_of(stats.max), bits_of(cpu.codec->local_scale(g, *cpu.stream)));
      const Bytes cpu_frame = cpu.encode(g, ctx);
      const float scale = agreed ? 4.0f : stats.max;
      const MirrorFrame mirrored = mirror_qsgd_encode<Int>(
          header_for(CodecId::kQsgd, n, step, 4 + n * sizeof(Int), param), g, residual.data(),
          scale, levels, rules::qsgd_key(ctx.job_seed, ctx.worker, kTensor, step));
      ASSERT_EQ(cpu_frame.empty(), mirrored.bad != 0) << "step " << step;
      if (!cpu_frame.empty()) {
        ASSERT_TRUE(same_bytes(cpu_frame, mirrored.bytes)) << "step " << step;
        last = cpu_frame;
      }
      ASSERT_TRUE(same_bits(cpu.residual(), residual)) << "step " << step;
    }
    // Sum a frame with itself (same scale): the CPU agrees while the headroom lasts.
    auto cpu_sum = test_util::add_frame_bytes(*cpu.codec, last, last);
    const FrameView view = parse_frame(last).value();
    if (workers > 1) {
      ASSERT_TRUE(cpu_sum.ok()) << cpu_sum.status().to_string();
      FrameHeader h = view.header;
      h.param = (param & 0xFFFF) | 2u << 16;
      EXPECT_TRUE(same_bytes(
          *cpu_sum, mirror_qsgd_sum<Int>(h, view.payload.data(), view.payload.data()).bytes));
    } else {
      EXPECT_EQ(cpu_sum.status().code(), ErrorCode::kResourceExhausted);
    }
    const float to_value = wire::load<float>(view.payload.data()) / static_cast<float>(levels);
    for (bool overwrite : {false, true}) {
      std::vector<float> acc = make_finite_values(n, 302);
      std::vector<float> expected = acc;
      const Status status = overwrite ? cpu.codec->decode(view, nullptr, expected)
                                      : cpu.codec->decode_accumulate(view, nullptr, expected);
      ASSERT_TRUE(status.ok()) << status.to_string();
      EXPECT_TRUE(same_bits(expected, mirror_decode(acc, overwrite, [&](size_t i) {
                              return rules::qsgd_value(
                                  wire::load<Int>(view.payload.data() + 4 + i * sizeof(Int)),
                                  to_value);
                            })));
    }
  }
};

TEST_P(QsgdMirrorTest, FramesResidualsSumsAndDecodesMatchTheCpuCodec) {
  switch (qsgd_level_bytes(GetParam().bits, qsgd_headroom_bits(GetParam().workers))) {
    case 1:
      run<int8_t>();
      break;
    case 2:
      run<int16_t>();
      break;
    default:
      run<int32_t>();
      break;
  }
}

std::vector<QsgdCase> qsgd_cases() {
  // Level widths 1 (bits 1, 4, 7), 2 (bits 8, 12) and 4 (bits 13, 15).
  const std::pair<int, int> widths[] = {{1, 1},  {4, 8},  {7, 1},     {8, 64},
                                        {12, 8}, {13, 8}, {15, 65535}};
  std::vector<QsgdCase> cases;
  for (const auto& [bits, workers] : widths) {
    for (size_t n :
         {size_t{1}, size_t{65}, size_t{1023}, size_t{2049}, size_t{4097}, size_t{100003}}) {
      cases.push_back({bits, workers, false, n});
    }
    cases.push_back({bits, workers, true, 1000});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, QsgdMirrorTest, ::testing::ValuesIn(qsgd_cases()),
                         [](const auto& test) {
                           return "bits" + std::to_string(test.param.bits) + "_workers" +
                                  std::to_string(test.param.workers) +
                                  (test.param.agreed ? "_agreed_" : "_local_") +
                                  std::to_string(test.param.n);
                         });

struct SignCase {
  bool error_feedback;
  size_t n;
};

class SignMirrorTest : public ::testing::TestWithParam<SignCase> {};

TEST_P(SignMirrorTest, FramesResidualsAndDecodesMatchTheCpuCodec) {
  const auto [ef, n] = GetParam();
  CpuCodec cpu(ef ? "sign" : "sign:ef=0", n);
  std::vector<float> residual(ef ? n : 0, 0.0f);
  float* e = ef ? residual.data() : nullptr;
  Bytes last;
  for (uint64_t step = 0; step < 6; ++step) {
    const bool specials = step == 2;
    const auto g = specials ? make_values(n, 400 + step, true) : make_finite_values(n, 400 + step);
    const Bytes cpu_frame = cpu.encode(g, context_for(step));
    const Stats stats = mirror_abs_stats(g, e);
    const auto scale = static_cast<float>(stats.sum / static_cast<double>(n));
    ASSERT_EQ(cpu_frame.empty(), stats.bad != 0 || !std::isfinite(scale)) << "step " << step;
    if (!cpu_frame.empty()) {
      const MirrorFrame mirrored =
          mirror_sign_encode(header_for(CodecId::kSign, n, step, 4 + (n + 7) / 8), g, e, scale);
      ASSERT_TRUE(same_bytes(cpu_frame, mirrored.bytes)) << "step " << step;
      last = cpu_frame;
    }
    ASSERT_TRUE(same_bits(cpu.residual(), residual)) << "step " << step;
  }
  const FrameView view = parse_frame(last).value();
  const float scale = wire::load<float>(view.payload.data());
  const auto* bitmap = reinterpret_cast<const uint8_t*>(view.payload.data() + 4);
  for (bool overwrite : {false, true}) {
    std::vector<float> acc = make_finite_values(n, 402);
    std::vector<float> expected = acc;
    const Status status = overwrite ? cpu.codec->decode(view, nullptr, expected)
                                    : cpu.codec->decode_accumulate(view, nullptr, expected);
    ASSERT_TRUE(status.ok()) << status.to_string();
    EXPECT_TRUE(same_bits(expected, mirror_decode(acc, overwrite, [&](size_t i) {
                            return rules::sign_value((bitmap[i / 8] >> (i % 8)) & 1u, scale);
                          })));
  }
}

std::vector<SignCase> sign_cases() {
  std::vector<SignCase> cases;
  for (bool ef : {true, false}) {
    for (size_t n : kSizes) cases.push_back({ef, n});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, SignMirrorTest, ::testing::ValuesIn(sign_cases()),
                         [](const auto& test) {
                           return std::string(test.param.error_feedback ? "ef_" : "noef_") +
                                  std::to_string(test.param.n);
                         });

TEST(SignMirrorTest, OrderedSumMatchesTheCpuScaleOnLongTensors) {
  // Many 4096-element blocks and a tail: the sum's order decides the scale's last bits.
  for (size_t n : {size_t{4096 * 37 + 5}, size_t{1 << 20}}) {
    CpuCodec cpu("sign", n);
    const auto g = make_finite_values(n, 500);
    const Bytes frame = cpu.encode(g, context_for(1));
    ASSERT_FALSE(frame.empty());
    const Stats stats = mirror_abs_stats(g, nullptr);
    EXPECT_EQ(wire::load<float>(frame.data() + kFrameHeaderBytes),
              static_cast<float>(stats.sum / static_cast<double>(n)));
  }
}

}  // namespace
}  // namespace gradgate::kernels
