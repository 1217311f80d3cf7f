// The fixture of the codec contract tests (codec_contract_test.cc, codec_isa_test.cc): the CPU
// codec of one spec, streams of it, and one worker's step.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "codec_test_util.h"
#include "gradgate/base/status.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"
#include "gradient_data.h"

namespace gradgate::kernels::contract {

class CodecContractTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto params = parse_codec_spec(GetParam());
    ASSERT_TRUE(params.ok()) << params.status().to_string();
    params_ = *params;
    auto codec = make_cpu_codec(params_);
    ASSERT_TRUE(codec.ok()) << codec.status().to_string();
    codec_ = std::move(codec).value();
  }

  std::vector<std::unique_ptr<Stream>> streams(const TensorDesc& desc, size_t count) {
    auto made = test_util::make_streams(*codec_, desc, count);
    EXPECT_TRUE(made.ok()) << made.status().to_string();
    return made.ok() ? std::move(made).value() : std::vector<std::unique_ptr<Stream>>{};
  }

  // One step of one worker; the decoded vector is what that worker obtains.
  std::vector<float> step_one(Stream& stream, const std::vector<float>& grad, uint64_t step) {
    Stream* one[] = {&stream};
    StepContext ctx;
    ctx.step = step;
    ctx.job_seed = 0x5EED;
    auto out = test_util::run_step(*codec_, one, std::span(&grad, 1), ctx);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    return out.ok() ? out->decoded[0] : std::vector<float>{};
  }

  // A finite gradient is valid input even where it leaves the wire format's range: encode must
  // either reject it with kNonFiniteGradient (the step is skipped), keeping the residual, or send a
  // frame that decodes to finite values and keep a finite residual; either way the next step works.
  void expect_large_gradient_handled(float magnitude) {
    const TensorDesc desc = test_util::matrix_desc(64, 64);
    const size_t n = desc.elements;
    auto s = streams(desc, 1);
    ASSERT_EQ(s.size(), 1u);
    auto grad = bench::make_gradient(bench::Dist::kLaplace, n, 600);
    for (const size_t i : {10, 18, 26}) grad[i] = i == 18 ? -magnitude : magnitude;  // one lane
    Stream* one[] = {s[0].get()};
    StepContext ctx;
    auto out = test_util::run_step(*codec_, one, std::span(&grad, 1), ctx);
    const auto residual = s[0]->residual();
    if (out.ok()) {
      for (size_t i = 0; i < n; ++i) ASSERT_TRUE(std::isfinite(out->decoded[0][i])) << i;
      for (size_t i = 0; i < residual.size(); ++i) ASSERT_TRUE(std::isfinite(residual[i])) << i;
    } else {
      ASSERT_EQ(out.status().code(), ErrorCode::kNonFiniteGradient) << out.status().to_string();
      for (size_t i = 0; i < residual.size(); ++i) ASSERT_EQ(residual[i], 0.0f) << i;
    }
    ctx.step = 1;
    const auto next = bench::make_gradient(bench::Dist::kLaplace, n, 601);
    auto later = test_util::run_step(*codec_, one, std::span(&next, 1), ctx);
    EXPECT_TRUE(later.ok()) << "the next step fails: " << later.status().to_string();
  }

  CodecParams params_;
  std::unique_ptr<Codec> codec_;
};

}  // namespace gradgate::kernels::contract
