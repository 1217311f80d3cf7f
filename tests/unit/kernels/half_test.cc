// Tests of the fp32 <-> fp16 / bf16 conversions (gradgate/kernels/half.h) against exhaustive
// round trips, the F16C hardware conversion and an independent bf16 reference, of the
// encode_fp16 / encode_bf16 loops of both instruction sets (kernels/cpu/loops.h), and of what the
// fp16 and bf16 codecs do with a gradient beyond their range.
#include "gradgate/kernels/half.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codec_test_util.h"
#include "loops.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace gradgate::kernels {
namespace {

bool fp16_is_nan(uint16_t h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x03FFu) != 0; }
bool bf16_is_nan(uint16_t h) { return (h & 0x7F80u) == 0x7F80u && (h & 0x007Fu) != 0; }

#if defined(__x86_64__)
// F16C by cpuid (leaf 1, ECX bit 29), as clang before 16 rejects __builtin_cpu_supports("f16c");
// its VEX-encoded instructions also need the OS to save AVX state, which "avx" checks.
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0 &&
         __builtin_cpu_supports("avx");
}

// _mm_cvtps_ph is _cvtss_sh on a whole register (clang's _cvtss_sh macro trips -Wpedantic).
__attribute__((target("f16c"))) uint16_t hardware_float_to_fp16(float f) {
  const __m128i h = _mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT);
  return static_cast<uint16_t>(_mm_extract_epi16(h, 0));
}

__attribute__((target("f16c"))) float hardware_fp16_to_float(uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}
#else
bool has_f16c() { return false; }
uint16_t hardware_float_to_fp16(float) { return 0; }
float hardware_fp16_to_float(uint16_t) { return 0.0f; }
#endif

// ---- fp16 ------------------------------------------------------------------------------------

TEST(HalfTest, Fp16RoundTripsEveryBitPattern) {
  for (uint32_t bits = 0; bits <= 0xFFFFu; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float f = fp16_to_float(h);
    if (fp16_is_nan(h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << "0x" << bits;
      ASSERT_TRUE(fp16_is_nan(float_to_fp16(f))) << std::hex << "0x" << bits;
      ASSERT_EQ(float_to_fp16(f) & 0x8000u, h & 0x8000u) << "sign of NaN 0x" << std::hex << bits;
    } else {
      ASSERT_EQ(float_to_fp16(f), h) << std::hex << "0x" << bits << " -> " << f;
    }
  }
}

TEST(HalfTest, Fp16ToFloatMatchesF16c) {
  if (!has_f16c()) GTEST_SKIP() << "CPU lacks F16C";
  for (uint32_t bits = 0; bits <= 0xFFFFu; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float ours = fp16_to_float(h), hw = hardware_fp16_to_float(h);
    if (fp16_is_nan(h)) {
      ASSERT_TRUE(std::isnan(ours) && std::isnan(hw)) << std::hex << "0x" << bits;
    } else {
      ASSERT_EQ(float_bits(ours), float_bits(hw)) << std::hex << "0x" << bits;
    }
  }
}

// Floats that exercise every branch of float_to_fp16: random bit patterns (every exponent,
// float subnormals, infinities, NaNs), the fp16 range in detail, exact ties between adjacent fp16
// values and their neighbours, and the overflow and subnormal boundaries.
std::vector<float> fp16_conversion_inputs() {
  std::mt19937 rng(2024);
  std::vector<float> out;
  out.reserve(1'100'000);
  for (int i = 0; i < 250'000; ++i) out.push_back(bits_float(rng()));
  for (int i = 0; i < 400'000; ++i) {
    const uint32_t exponent = 100 + rng() % 46;  // 2^-27 .. 2^18: fp16 subnormals to overflow
    out.push_back(bits_float((rng() & 0x80000000u) | exponent << 23 | (rng() & 0x7FFFFFu)));
  }
  for (int i = 0; i < 100'000; ++i) {  // float subnormals and tiny normals: all round to +-0
    out.push_back(bits_float((rng() & 0x80000000u) | (rng() % 3) << 23 | (rng() & 0x7FFFFFu)));
  }
  for (int i = 0; i < 250'000; ++i) {  // ties: the exact midpoint of two adjacent finite fp16
    const auto h = static_cast<uint16_t>(rng() % 0x7BFFu);  // h + 1 is finite
    const double mid =
        0.5 * (static_cast<double>(fp16_to_float(h)) + static_cast<double>(fp16_to_float(h + 1)));
    const float tie = static_cast<float>(mid);
    EXPECT_EQ(static_cast<double>(tie), mid) << "tie not exact for 0x" << std::hex << h;
    const float sign = rng() & 1 ? -1.0f : 1.0f;
    out.push_back(sign * tie);
    out.push_back(sign * std::nextafter(tie, 0.0f));
    out.push_back(sign * std::nextafter(tie, 1e9f));
  }
  for (float edge :
       {65504.0f, 65519.996f, 65520.0f, 65536.0f, 1e10f, 6.1035156e-05f /* 2^-14 */,
        6.0975552e-05f /* largest fp16 subnormal */, 5.9604645e-08f /* 2^-24 */,
        2.9802322e-08f /* 2^-25: tie with zero */, 2.9802326e-08f, 8.940697e-08f, 0.0f,
        std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
        std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()}) {
    out.push_back(edge);
    out.push_back(-edge);
    out.push_back(std::nextafter(edge, 0.0f));
    out.push_back(std::nextafter(edge, 1e30f));
  }
  return out;
}

TEST(HalfTest, FloatToFp16MatchesF16cRoundToNearestEven) {
  if (!has_f16c()) GTEST_SKIP() << "CPU lacks F16C";
  const auto inputs = fp16_conversion_inputs();
  ASSERT_GE(inputs.size(), 1'000'000u);
  size_t mismatches = 0;
  for (float f : inputs) {
    const uint16_t ours = float_to_fp16(f), hw = hardware_float_to_fp16(f);
    // NaN payloads may differ (F16C keeps the top payload bits); NaN-ness and sign must not.
    const bool same =
        std::isnan(f) ? fp16_is_nan(ours) && fp16_is_nan(hw) && (ours & 0x8000u) == (hw & 0x8000u)
                      : ours == hw;
    if (!same && ++mismatches <= 10) {
      ADD_FAILURE() << std::hex << "float 0x" << float_bits(f) << " (" << f << "): ours 0x" << ours
                    << ", F16C 0x" << hw;
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(HalfTest, Fp16OverflowAndUnderflowBoundaries) {
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7BFFu);
  EXPECT_EQ(float_to_fp16(std::nextafter(65520.0f, 0.0f)), 0x7BFFu);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7C00u);  // tie: max is odd, rounds up to infinity
  EXPECT_EQ(float_to_fp16(-1e10f), 0xFC00u);
  EXPECT_EQ(float_to_fp16(2.9802322e-08f), 0x0000u);  // 2^-25: tie between 0 and 2^-24, even 0
  EXPECT_EQ(float_to_fp16(std::nextafter(2.9802322e-08f, 1.0f)), 0x0001u);
  EXPECT_EQ(float_to_fp16(8.940697e-08f), 0x0002u);  // 1.5 * 2^-24: tie, even is 2
  EXPECT_EQ(float_to_fp16(-0.0f), 0x8000u);
  EXPECT_EQ(float_to_fp16(1.0f + 0x1p-11f), 0x3C00u);      // tie below: 1.0 is even
  EXPECT_EQ(float_to_fp16(1.0f + 3 * 0x1p-11f), 0x3C02u);  // tie above 0x3C01: up to even
}

// ---- bf16 ------------------------------------------------------------------------------------

// Round-to-nearest-even to bf16 by comparing distances in double (independent of half.h).
uint16_t reference_bf16(float f) {
  const uint32_t u = float_bits(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40u);
  const uint32_t down = u & 0xFFFF0000u;
  const double lo = std::fabs(static_cast<double>(bits_float(down)));
  // The next bf16 up in magnitude; past the largest finite one it is infinity (2^128 for the
  // distance comparison, as IEEE rounding treats it).
  const uint32_t up_bits = (down & 0x7FFFFFFFu) + 0x10000u;
  const double hi =
      up_bits >= 0x7F800000u ? std::ldexp(1.0, 128) : static_cast<double>(bits_float(up_bits));
  const double a = std::fabs(static_cast<double>(f));
  const uint16_t down_h = static_cast<uint16_t>(down >> 16);
  if (std::isinf(f)) return down_h;
  if (a - lo < hi - a) return down_h;
  if (a - lo > hi - a) return static_cast<uint16_t>(down_h + 1);
  return (down_h & 1u) ? static_cast<uint16_t>(down_h + 1) : down_h;
}

TEST(HalfTest, Bf16RoundsTiesToEven) {
  const struct {
    uint32_t in;
    uint16_t out;
  } cases[] = {
      {0x3F808000u, 0x3F80u},  // tie, even below: down
      {0x3F818000u, 0x3F82u},  // tie, odd below: up
      {0x3F807FFFu, 0x3F80u},  // just below the tie
      {0x3F808001u, 0x3F81u},  // just above the tie
      {0xBF818000u, 0xBF82u},  // negative tie: magnitude up
      {0x3FFF8000u, 0x4000u},  // tie carries into the exponent
      {0x7F7F8000u, 0x7F80u},  // tie above the largest finite (odd): infinity
      {0x7F7E8000u, 0x7F7Eu},  // tie below it (even): stays finite
      {0x00008000u, 0x0000u},  // subnormal tie: even zero
      {0x00018000u, 0x0002u},  // subnormal tie, odd: up
      {0x7F800000u, 0x7F80u},  // infinity
      {0xFF800000u, 0xFF80u},  // -infinity
      {0x80000000u, 0x8000u},  // -0
  };
  for (const auto& c : cases) {
    EXPECT_EQ(float_to_bf16(bits_float(c.in)), c.out) << std::hex << "0x" << c.in;
    EXPECT_EQ(reference_bf16(bits_float(c.in)), c.out) << std::hex << "reference 0x" << c.in;
  }
  for (uint32_t nan : {0x7FC00000u, 0x7F800001u, 0xFFFFFFFFu, 0x7FFF8000u}) {
    EXPECT_TRUE(bf16_is_nan(float_to_bf16(bits_float(nan)))) << std::hex << "0x" << nan;
  }
}

TEST(HalfTest, Bf16MatchesReferenceOnRandomFloats) {
  std::mt19937 rng(7);
  for (int i = 0; i < 1'000'000; ++i) {
    uint32_t u = rng();
    if (i % 4 == 1) u = (u & 0xFFFF0000u) | 0x8000u;  // exact ties
    if (i % 4 == 2) u = (u & 0xFFFF0000u) | (0x8000u + (rng() & 1 ? 1u : 0xFFFFFFFFu));
    const float f = bits_float(u);
    const uint16_t ours = float_to_bf16(f), ref = reference_bf16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(bf16_is_nan(ours)) << std::hex << "0x" << u;
    } else {
      ASSERT_EQ(ours, ref) << std::hex << "0x" << u;
    }
  }
}

TEST(HalfTest, Bf16RoundTripsEveryBitPattern) {
  for (uint32_t bits = 0; bits <= 0xFFFFu; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float f = bf16_to_float(h);
    ASSERT_EQ(float_bits(f), bits << 16);
    if (bf16_is_nan(h)) {
      ASSERT_TRUE(bf16_is_nan(float_to_bf16(f))) << std::hex << "0x" << bits;
    } else {
      ASSERT_EQ(float_to_bf16(f), h) << std::hex << "0x" << bits;
    }
  }
}

// ---- encode loops of both instruction sets ----------------------------------------------------

struct EncodeOutput {
  size_t bad = 0;
  std::vector<uint16_t> out;
  std::vector<float> residual;
};

using EncodeLoop = size_t (*)(const float*, float*, uint16_t*, size_t);

EncodeOutput run_encode(EncodeLoop loop, const std::vector<float>& g, const std::vector<float>& e0,
                        bool with_residual) {
  EncodeOutput r;
  r.out.assign(g.size(), 0xDEADu);
  r.residual = e0;
  r.bad = loop(g.data(), with_residual ? r.residual.data() : nullptr, r.out.data(), g.size());
  return r;
}

// Gradients and residuals that hit every conversion path, with a length that leaves a tail after
// the last 8- and 16-element blocks.
void make_encode_inputs(std::vector<float>& g, std::vector<float>& e) {
  std::mt19937 rng(99);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr size_t n = 4096 + 7;
  g.resize(n);
  e.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const float magnitude = std::ldexp(1.0f, static_cast<int>(rng() % 50) - 30);  // 2^-30 .. 2^19
    g[i] = normal(rng) * magnitude;
    e[i] = normal(rng) * magnitude * 1e-3f;
    if (i % 97 == 5) {  // an fp16 tie (kept one with a zero residual)
      g[i] = 0.5f * (fp16_to_float(static_cast<uint16_t>(i)) +
                     fp16_to_float(static_cast<uint16_t>(i + 1)));
      e[i] = 0.0f;
    }
    if (i % 89 == 3) {  // a bf16 tie
      g[i] = bits_float((float_bits(g[i]) & 0xFFFF0000u) | 0x8000u);
      e[i] = 0.0f;
    }
  }
  g[100] = std::numeric_limits<float>::quiet_NaN();
  g[n - 2] = std::numeric_limits<float>::quiet_NaN();  // in the tail
  g[200] = std::numeric_limits<float>::infinity();
  g[201] = -std::numeric_limits<float>::infinity();
  g[300] = std::numeric_limits<float>::max();
  e[300] = std::numeric_limits<float>::max();  // g + e overflows to infinity
  g[400] = 70000.0f;                           // finite but beyond fp16: saturates
  g[401] = -65520.0f;                          // rounds to -infinity unless saturated
  g[402] = 3.4e38f;                            // beyond bf16's largest finite value
  g[403] = 65519.996f;                         // the largest that rounds to fp16's largest
  e[400] = e[401] = e[402] = e[403] = 0.0f;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(HalfTest, EncodeLoopsOfBothIsasAgree) {
  using cpu::Isa;
  if (cpu::best_isa() != Isa::kAvx2) GTEST_SKIP() << "CPU lacks AVX2/FMA/F16C";
  std::vector<float> g, e;
  make_encode_inputs(g, e);
  cpu::force_isa(Isa::kBaseline);
  const cpu::LoopTable& base = cpu::loops();
  cpu::force_isa(Isa::kAvx2);
  const cpu::LoopTable& avx = cpu::loops();
  cpu::force_isa(cpu::best_isa());
  ASSERT_NE(&base, &avx);

  for (bool bf16 : {false, true}) {
    for (bool with_residual : {true, false}) {
      SCOPED_TRACE(std::string(bf16 ? "bf16" : "fp16") + (with_residual ? " with" : " without") +
                   " residual");
      const EncodeLoop base_loop = bf16 ? base.encode_bf16 : base.encode_fp16;
      const EncodeLoop avx_loop = bf16 ? avx.encode_bf16 : avx.encode_fp16;
      const EncodeOutput b = run_encode(base_loop, g, e, with_residual);
      const EncodeOutput a = run_encode(avx_loop, g, e, with_residual);
      // With the residual: two NaNs, two infinities and one sum that overflows. Without: every
      // value that cast to the format is infinite (nothing would keep what saturation cuts off).
      size_t unsendable = 0;
      for (size_t i = 0; i < g.size(); ++i) {
        const float v = with_residual ? g[i] + e[i] : g[i];
        const float cast = bf16 ? bf16_to_float(float_to_bf16(v)) : fp16_to_float(float_to_fp16(v));
        unsendable += !std::isfinite(with_residual ? v : cast);
      }
      EXPECT_EQ(b.bad, unsendable);
      if (with_residual) {
        EXPECT_EQ(b.bad, 5u);
      }
      EXPECT_EQ(a.bad, b.bad);
      EXPECT_TRUE(same_bits(a.residual, b.residual));
      for (size_t i = 0; i < g.size(); ++i) {
        const float v = with_residual ? g[i] + e[i] : g[i];
        // Outputs for NaN are not part of the contract (the codec rejects the whole gradient).
        if (std::isnan(v)) continue;
        ASSERT_EQ(a.out[i], b.out[i]) << "element " << i << " v " << v;
        const float max = bf16 ? kBf16Max : kFp16Max;
        const float saturated = std::clamp(v, -max, max);
        const uint16_t expected = bf16 ? float_to_bf16(saturated) : float_to_fp16(saturated);
        ASSERT_EQ(b.out[i], expected) << "element " << i << " v " << v;
        if (with_residual && std::isfinite(v)) {
          const float sent = bf16 ? bf16_to_float(expected) : fp16_to_float(expected);
          ASSERT_EQ(float_bits(b.residual[i]), float_bits(v - sent)) << "element " << i;
        } else if (with_residual) {
          ASSERT_EQ(float_bits(b.residual[i]), float_bits(e[i])) << "kept at " << i;
        }
      }
      if (!bf16) {  // saturation keeps the excess in the residual
        EXPECT_EQ(b.out[400], 0x7BFFu);
        EXPECT_EQ(b.out[401], 0xFBFFu);
        EXPECT_EQ(b.out[403], 0x7BFFu);
        if (with_residual) {
          EXPECT_EQ(b.residual[400], 70000.0f - 65504.0f);
          EXPECT_EQ(b.residual[401], -16.0f);
        } else {  // 70000 and -65520 are infinite in fp16; 65519.996 is its largest value
          EXPECT_GE(b.bad, 2u);
          g[400] = g[401] = 1.0f;
          const EncodeOutput fixed = run_encode(base_loop, g, e, false);
          EXPECT_EQ(fixed.bad + 2, b.bad);
          g[400] = 70000.0f, g[401] = -65520.0f;
        }
      } else {
        EXPECT_EQ(b.out[402], 0x7F7Fu);
      }
    }
  }
}

// With error feedback, a value beyond the format's range goes saturated and the residual keeps the
// rest; without, the encode refuses it as a cast to the format would make it infinite (as DDP's
// own fp16 all-reduce would), instead of sending the largest value and changing the sum unseen.
TEST(HalfCodecTest, WithoutAResidualAValueBeyondTheRangeIsRefusedLikeAnInfiniteOne) {
  struct Case {
    const char* format;
    float beyond, within;  // a cast to the format: infinite, and its largest finite value
  };
  for (const Case& c : {Case{"fp16", 70000.0f, 65519.996f}, Case{"bf16", 3.4e38f, 3.396e38f}}) {
    SCOPED_TRACE(c.format);
    const TensorDesc desc = test_util::matrix_desc(1, 64);
    std::vector<float> grad(desc.elements, 0.5f);
    grad[9] = c.beyond;
    for (bool feedback : {true, false}) {
      auto codec = test_util::make_codec(std::string(c.format) + (feedback ? "" : ":ef=0"));
      ASSERT_TRUE(codec.ok()) << codec.status().to_string();
      auto streams = test_util::make_streams(**codec, desc, 1);
      ASSERT_TRUE(streams.ok());
      Stream& stream = *(*streams)[0];
      auto frame = test_util::encode_frame(**codec, 0, StepContext{}, grad, stream);
      if (feedback) {
        ASSERT_TRUE(frame.ok()) << frame.status().to_string();
        std::vector<float> decoded(desc.elements, 0.0f);
        ASSERT_TRUE(test_util::decode_frame(**codec, *frame, &stream, decoded).ok());
        const float largest = std::string(c.format) == "fp16" ? kFp16Max : kBf16Max;
        EXPECT_EQ(decoded[9], largest);
        EXPECT_EQ(stream.residual()[9], c.beyond - largest);
        continue;
      }
      ASSERT_FALSE(frame.ok());
      EXPECT_EQ(frame.status().code(), ErrorCode::kNonFiniteGradient);
      EXPECT_NE(frame.status().message().find("has 1 NaN or infinite values"), std::string::npos)
          << frame.status().message();
      EXPECT_NE(frame.status().message().find("beyond the 16-bit format's range"),
                std::string::npos);
      grad[9] = c.within;
      EXPECT_TRUE(test_util::encode_frame(**codec, 0, StepContext{}, grad, stream).ok());
      grad[9] = c.beyond;
    }
  }
}

}  // namespace
}  // namespace gradgate::kernels
