// The CUDA codecs' logic, checked on the CPU: a host mirror of every element-wise kernel
// (element_mirror.h) must reproduce the CPU codecs' frames and residuals byte for byte, over
// random data with NaN, infinities, saturating values, denormals and zeros. A GPU kernel that
// follows its mirror produces the CPU's frames; tests/unit/kernels_cuda checks the kernels
// themselves where a GPU is present. crc32c_combine_test.cc checks the checksum's algebra.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "codec_data.h"
#include "codec_test_util.h"
#include "element_mirror.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/element_rules.h"
#include "gradgate/kernels/frame.h"
#include "gradgate/kernels/half.h"
#include "gradgate/kernels/philox.h"
#include "gradgate/kernels/wire_io.h"

namespace gradgate::kernels {
namespace {

using mirror::context_for;
using mirror::CpuCodec;
using mirror::header_for;
using mirror::kTensor;
using mirror::mirror_abs_stats;
using mirror::mirror_decode;
using mirror::mirror_half_encode;
using mirror::mirror_half_sum;
using mirror::mirror_none;
using mirror::mirror_qsgd_encode;
using mirror::mirror_qsgd_sum;
using mirror::mirror_sign_encode;
using mirror::MirrorFrame;
using mirror::Stats;
using test_util::Bytes;

// ---- inputs -----------------------------------------------------------------------------------

using test_util::make_finite_values;
using test_util::make_values;
using test_util::same_bits;
using test_util::same_bytes;

const std::vector<size_t> kSizes = {1,    7,    8,    63,   64,   65,   1000,  1023,
                                    1025, 2049, 4095, 4096, 4097, 8200, 100003};

uint32_t bits_of(float v) { return std::bit_cast<uint32_t>(v); }

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
