// The codec contract under both instruction sets (codec.h, kernels/cpu/loops.h): the baseline
// and AVX2 loops send the same frames and decode them the same, bit for bit where the loops are
// exact. Instantiated over every codec with the other contract tests (codec_contract_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "codec_contract_fixture.h"
#include "codec_test_util.h"
#include "gradgate/base/status.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"
#include "gradient_data.h"
#include "loops.h"

namespace gradgate::kernels {
namespace {

using bench::Dist;
using bench::make_gradient;
using contract::CodecContractTest;
using test_util::Bytes;

// Values that probe rounding: fp16 and bf16 ties, fp16 subnormals, the top of the fp16 range.
std::vector<float> gradient_with_rounding_probes(size_t n, uint64_t seed) {
  auto grad = make_gradient(Dist::kLaplace, n, seed);
  const float probes[] = {1.0f + 1.0f / 2048,
                          1.0f + 3.0f / 2048,
                          1.0f + 1.0f / 256,
                          1.0f + 3.0f / 256,
                          1.5f * 5.9604645e-8f,
                          2.5f * 5.9604645e-8f,
                          6.1035156e-5f,
                          6.0975552e-5f,
                          65504.0f,
                          -0.0f,
                          0.0f,
                          -3.0517578e-5f,
                          1e-30f,
                          -1.0f - 1.0f / 2048};
  for (size_t i = 0; i < std::size(probes) && i < n; ++i) grad[7 * i] = probes[i];
  return grad;
}

// The probes suit the codecs that send values (a 65504 would dominate qsgd's and sign's scale).
bool probes_fit(const CodecParams& params) {
  return params.id != CodecId::kQsgd && params.id != CodecId::kSign &&
         params.id != CodecId::kPowersgd;
}

struct IsaRun {
  std::vector<Bytes> frames;                // last-round frame of each step
  std::vector<std::vector<float>> decoded;  // each step's decoded vector
};

// Index of the first element where a and b differ (bitwise), or a.size() when none does.
template <typename T>
size_t first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return i;
  }
  return a.size() == b.size() ? a.size() : std::min(a.size(), b.size());
}

// How far apart the decodings of the two instruction sets may be, per element, at one step.
// Bit-identical for the codecs whose loops are exact; qsgd's stochastic rounding may land a level
// apart (and then the residual differs by a level); sign's scale is a sum whose order follows the
// vector width; powersgd's products too.
double isa_tolerance(const CodecParams& params, const std::vector<float>& decoded) {
  double max_abs = 0.0;
  for (float v : decoded) max_abs = std::max(max_abs, std::fabs(static_cast<double>(v)));
  switch (params.id) {
    case CodecId::kQsgd:
      return 2.01 * max_abs / ((1 << params.bits) - 1);
    case CodecId::kSign:
    case CodecId::kPowersgd:
      return 1e-5 * max_abs;
    default:
      return 0.0;
  }
}

// Each frame decodes to the same vector of n elements under AVX2 as under the baseline loops
// (within a rounding for qsgd, whose acc += level * step may be fused into one).
void expect_frames_decode_alike(const Codec& codec, CodecId id, const std::vector<Bytes>& frames,
                                size_t n) {
  for (uint64_t step = 0; step < frames.size(); ++step) {
    std::vector<float> under_avx2(n, 0.0f), under_baseline(n, 0.0f);
    {
      test_util::ScopedIsa scoped(cpu::Isa::kAvx2);
      const Status st = test_util::decode_frame(codec, frames[step], nullptr, under_avx2);
      ASSERT_TRUE(st.ok()) << st.to_string();
    }
    {
      test_util::ScopedIsa scoped(cpu::Isa::kBaseline);
      const Status st = test_util::decode_frame(codec, frames[step], nullptr, under_baseline);
      ASSERT_TRUE(st.ok()) << st.to_string();
    }
    if (id != CodecId::kQsgd) {
      const size_t i = first_difference(under_avx2, under_baseline);
      EXPECT_EQ(i, n) << "step " << step << ": avx2 decodes " << under_avx2[i] << ", baseline "
                      << under_baseline[i];
      continue;
    }
    for (size_t i = 0; i < n; ++i) {  // qsgd: acc += level * step may be fused into one rounding
      ASSERT_NEAR(under_avx2[i], under_baseline[i], 1e-6 * std::fabs(under_baseline[i]))
          << "element " << i << " at step " << step;
    }
  }
}

TEST_P(CodecContractTest, BaselineAndAvx2FramesDecodeTheSame) {
  if (cpu::best_isa() != cpu::Isa::kAvx2) GTEST_SKIP() << "this CPU has no AVX2";
  const TensorDesc desc = test_util::matrix_desc(61, 67);
  const size_t n = desc.elements;
  constexpr uint64_t kSteps = 3;
  const auto run = [&](cpu::Isa isa) {
    test_util::ScopedIsa scoped(isa);
    IsaRun result;
    auto s = streams(desc, 1);
    for (uint64_t step = 0; step < kSteps && s.size() == 1; ++step) {
      const auto grad = probes_fit(params_) ? gradient_with_rounding_probes(n, 500 + step)
                                            : make_gradient(Dist::kLaplace, n, 500 + step);
      StepContext ctx;
      ctx.step = step;
      ctx.job_seed = 99;
      auto out =
          test_util::run_step(*codec_, test_util::stream_pointers(s), std::span(&grad, 1), ctx);
      EXPECT_TRUE(out.ok()) << out.status().to_string();
      if (!out.ok()) break;
      result.frames.push_back(out->frames.back()[0]);
      result.decoded.push_back(out->decoded[0]);
    }
    return result;
  };
  const IsaRun baseline = run(cpu::Isa::kBaseline);
  const IsaRun avx2 = run(cpu::Isa::kAvx2);
  ASSERT_EQ(baseline.decoded.size(), kSteps);
  ASSERT_EQ(avx2.decoded.size(), kSteps);

  for (uint64_t step = 0; step < kSteps; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const auto& a = baseline.decoded[step];
    const auto& b = avx2.decoded[step];
    const double tol = isa_tolerance(params_, a);
    if (tol == 0.0) {
      EXPECT_EQ(first_difference(baseline.frames[step], avx2.frames[step]),
                baseline.frames[step].size())
          << "first differing frame byte";
      const size_t i = first_difference(a, b);
      EXPECT_EQ(i, n) << "baseline decodes " << a[i] << ", avx2 " << b[i];
      continue;
    }
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      const bool same_sign = params_.id != CodecId::kSign || (a[i] > 0) == (b[i] > 0);
      if (!(std::fabs(static_cast<double>(a[i]) - b[i]) <= tol && same_sign) && ++bad <= 3) {
        ADD_FAILURE() << "element " << i << ": baseline decodes " << a[i] << ", avx2 " << b[i];
      }
    }
    EXPECT_EQ(bad, 0u);
  }

  // Decoding itself agrees: the baseline frames decode the same under AVX2 (powersgd's decode
  // needs the stream of its own run, so it is covered by the comparison above).
  if (params_.id == CodecId::kPowersgd) return;
  expect_frames_decode_alike(*codec_, params_.id, baseline.frames, n);
}

}  // namespace
}  // namespace gradgate::kernels
