// The contract every codec keeps (codec.h): bounded round-trip error, the error-feedback
// invariant, summability, qsgd's overflow headroom, rejection of non-finite gradients and of
// frames that do not fit the accumulator; codec_isa_test.cc adds the same answers under both
// instruction sets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "codec_bounds/codec_bound.h"
#include "codec_contract_fixture.h"
#include "codec_test_util.h"
#include "gradgate/base/status.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/frame.h"
#include "gradient_data.h"
#include "loops.h"

namespace gradgate::kernels {
namespace {

using bench::Dist;
using bench::make_gradient;
using contract::codec_bound;
using contract::CodecBound;
using contract::CodecContractTest;
using test_util::Bytes;

std::vector<float> fashion_mnist_gradient() {
#ifdef GRADGATE_SOURCE_DIR
  std::ifstream in(std::string(GRADGATE_SOURCE_DIR) + "/bench/data/fashion_mnist_gradients.f32",
                   std::ios::binary);
  std::vector<float> grad(79744);
  in.read(reinterpret_cast<char*>(grad.data()), static_cast<std::streamsize>(grad.size() * 4));
  if (in.gcount() == static_cast<std::streamsize>(grad.size() * 4)) return grad;
#endif
  return {};
}

// Each element of the decoded d within the bound the codec promises for one step of input g.
void expect_within_single_step_bound(const CodecParams& params, const std::vector<float>& g,
                                     const std::vector<float>& d) {
  ASSERT_EQ(d.size(), g.size());
  size_t bad = 0;
  const auto count_bad = [&](bool ok, size_t i) {
    if (!ok && ++bad <= 5) {
      ADD_FAILURE() << "element " << i << ": input " << g[i] << " decoded " << d[i];
    }
  };
  const CodecBound* bound = codec_bound(params.id);
  ASSERT_NE(bound, nullptr) << "no bound filed for " << codec_name(params.id);
  bound->single_step(params, g, d, count_bad);
  EXPECT_EQ(bad, 0u) << "elements outside the codec's bound";
}

// So that a new codec of the table cannot go untested: it needs its bound and a spec of it among
// those every contract test runs.
TEST(CodecBounds, EveryCodecOfTheTableHasOneAndIsTested) {
  for (const CodecTraits& codec : kCodecs) {
    EXPECT_NE(codec_bound(codec.id), nullptr)
        << codec.name << ": no bound filed (tests/unit/kernels/codec_bounds/)";
    const auto& specs = test_util::codec_specs();
    EXPECT_TRUE(std::any_of(
        specs.begin(), specs.end(),
        [&](const std::string& spec) { return parse_codec_spec(spec).value().id == codec.id; }))
        << codec.name << ": no spec of it in test_util::codec_specs()";
  }
}

TEST_P(CodecContractTest, SingleStepErrorIsWithinCodecBound) {
  const TensorDesc desc = test_util::matrix_desc(64, 64);
  auto s = streams(desc, 1);
  ASSERT_EQ(s.size(), 1u);
  const auto grad = make_gradient(Dist::kLaplace, desc.elements, 11);
  expect_within_single_step_bound(params_, grad, step_one(*s[0], grad, 0));
}

TEST_P(CodecContractTest, SingleStepErrorIsWithinCodecBoundOnRealGradient) {
  const auto grad = fashion_mnist_gradient();
  ASSERT_FALSE(grad.empty()) << "bench/data/fashion_mnist_gradients.f32 is missing";
  const TensorDesc desc = test_util::matrix_desc(128, 623);  // 79744 elements
  ASSERT_EQ(desc.elements, grad.size());
  auto s = streams(desc, 1);
  ASSERT_EQ(s.size(), 1u);
  expect_within_single_step_bound(params_, grad, step_one(*s[0], grad, 0));
}

// The same contract, for the codecs it applies to.
class SummableCodecTest : public CodecContractTest {};
class NonSummableCodecTest : public CodecContractTest {};
class PowersgdContractTest : public CodecContractTest {};

TEST_P(PowersgdContractTest, RecoversRankOneMatrix) {
  const TensorDesc desc = test_util::matrix_desc(48, 80);
  auto s = streams(desc, 1);
  ASSERT_EQ(s.size(), 1u);
  const auto u = make_gradient(Dist::kGaussian, desc.rows, 1, 1.0f);
  const auto v = make_gradient(Dist::kGaussian, desc.cols, 2, 1e-3f);
  std::vector<float> m(desc.elements);
  for (size_t i = 0; i < desc.rows; ++i) {
    for (size_t j = 0; j < desc.cols; ++j) m[i * desc.cols + j] = u[i] * v[j];
  }
  for (uint64_t step = 0; step < 3; ++step) {
    const auto d = step_one(*s[0], m, step);
    ASSERT_EQ(d.size(), m.size());
    double err = 0.0, norm = 0.0;
    for (size_t i = 0; i < m.size(); ++i) {
      err += (static_cast<double>(d[i]) - m[i]) * (static_cast<double>(d[i]) - m[i]);
      norm += static_cast<double>(m[i]) * m[i];
    }
    EXPECT_LE(std::sqrt(err), 1e-4 * std::sqrt(norm)) << "step " << step;
  }
}

TEST_P(CodecContractTest, ErrorFeedbackInvariantHoldsOver1000Steps) {
  const TensorDesc desc = test_util::matrix_desc(64, 64);
  const size_t n = desc.elements;
  auto s = streams(desc, 1);
  ASSERT_EQ(s.size(), 1u);
  const bool lossy = params_.id != CodecId::kNone;
  EXPECT_EQ(s[0]->residual().size(), lossy ? n : 0u);
  std::vector<double> sum_grad(n, 0.0), sum_decoded(n, 0.0), sum_abs(n, 0.0);
  for (uint64_t step = 0; step < 1000; ++step) {
    const auto grad = make_gradient(Dist::kLaplace, n, 1000 + step);
    const auto decoded = step_one(*s[0], grad, step);
    ASSERT_EQ(decoded.size(), n) << "step " << step;
    for (size_t i = 0; i < n; ++i) {
      sum_grad[i] += grad[i];
      sum_decoded[i] += decoded[i];
      sum_abs[i] += std::fabs(grad[i]);
    }
    if (step % 100 != 99) continue;
    const auto residual = s[0]->residual();
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      const double r = residual.empty() ? 0.0 : residual[i];
      const double gap = std::fabs(sum_grad[i] - (sum_decoded[i] + r));
      if (!(gap <= 1e-4 * sum_abs[i] + 1e-6) && ++bad <= 3) {
        ADD_FAILURE() << "step " << step << " element " << i << ": sum of gradients " << sum_grad[i]
                      << " != sum decoded " << sum_decoded[i] << " + residual " << r;
      }
    }
    ASSERT_EQ(bad, 0u) << "error-feedback invariant broken after step " << step;
  }
}

TEST_P(SummableCodecTest, DecodedSumEqualsSumOfDecodedFrames) {
  constexpr size_t kWorkers = 4;
  const TensorDesc desc = test_util::matrix_desc(61, 67);  // odd sizes reach the scalar tails
  const size_t n = desc.elements;
  auto s = streams(desc, kWorkers);
  ASSERT_EQ(s.size(), kWorkers);
  std::vector<std::vector<float>> grads;
  for (size_t w = 0; w < kWorkers; ++w) grads.push_back(make_gradient(Dist::kLaplace, n, 40 + w));
  StepContext ctx;
  ctx.step = 5;
  ctx.job_seed = 77;
  auto out = test_util::run_step(*codec_, test_util::stream_pointers(s), grads, ctx);
  ASSERT_TRUE(out.ok()) << out.status().to_string();

  // Each worker's last-round frame decoded on its own (powersgd: against the absorbed P_hat).
  std::vector<double> sum_of_decoded(n, 0.0), sum_abs(n, 0.0);
  for (size_t w = 0; w < kWorkers; ++w) {
    std::vector<float> acc(n, 0.0f);
    const Status st = test_util::decode_frame(*codec_, out->frames.back()[w], s[w].get(), acc);
    ASSERT_TRUE(st.ok()) << st.to_string();
    for (size_t i = 0; i < n; ++i) {
      sum_of_decoded[i] += acc[i];
      sum_abs[i] += std::fabs(acc[i]);
    }
  }
  // Three add_frames() each round their sum for the 16-bit formats; fp32 and integers add exactly
  // up to float rounding of the decode.
  const CodecBound* bound = codec_bound(params_.id);
  ASSERT_NE(bound, nullptr) << "no bound filed for " << codec_name(params_.id);
  const double rel = bound->sum_relative, abs_tol = bound->sum_absolute;
  const std::vector<float>& decoded_sum = out->decoded[0];
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const double gap = std::fabs(decoded_sum[i] - sum_of_decoded[i]);
    if (!(gap <= rel * sum_abs[i] + abs_tol) && ++bad <= 3) {
      ADD_FAILURE() << "element " << i << ": decoded sum " << decoded_sum[i]
                    << " != sum of decoded " << sum_of_decoded[i];
    }
  }
  EXPECT_EQ(bad, 0u);
}

TEST_P(CodecContractTest, AllWorkersDecodeBitIdenticalAggregate) {
  constexpr size_t kWorkers = 4;
  const TensorDesc desc = test_util::matrix_desc(64, 64);
  auto s = streams(desc, kWorkers);
  ASSERT_EQ(s.size(), kWorkers);
  std::vector<std::vector<float>> grads;
  for (size_t w = 0; w < kWorkers; ++w) {
    grads.push_back(make_gradient(Dist::kStudentT3, desc.elements, 90 + w));
  }
  StepContext ctx;
  ctx.job_seed = 1234;
  for (uint64_t step = 0; step < 3; ++step) {
    ctx.step = step;
    auto out = test_util::run_step(*codec_, test_util::stream_pointers(s), grads, ctx);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    for (size_t w = 1; w < kWorkers; ++w) {
      ASSERT_EQ(out->decoded[w].size(), out->decoded[0].size());
      EXPECT_EQ(std::memcmp(out->decoded[w].data(), out->decoded[0].data(),
                            out->decoded[0].size() * sizeof(float)),
                0)
          << "worker " << w << " decoded a different aggregate at step " << step;
    }
  }
}

TEST_P(NonSummableCodecTest, RefusesAddFrames) {
  const TensorDesc desc = test_util::matrix_desc(16, 16);
  auto s = streams(desc, 1);
  ASSERT_EQ(s.size(), 1u);
  const auto grad = make_gradient(Dist::kLaplace, desc.elements, 3);
  auto frame = test_util::encode_frame(*codec_, 0, StepContext{}, grad, *s[0]);
  ASSERT_TRUE(frame.ok()) << frame.status().to_string();
  auto sum = test_util::add_frame_bytes(*codec_, *frame, *frame);
  ASSERT_FALSE(sum.ok());
  EXPECT_EQ(sum.status().code(), ErrorCode::kUnsupported);
}

TEST_P(CodecContractTest, NonFiniteGradientIsRejectedAndResidualKept) {
  const TensorDesc desc = test_util::matrix_desc(61, 67);
  const size_t n = desc.elements;
  const float kBadValues[] = {std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::infinity()};
  const size_t kPositions[] = {0, n / 2 + 3, n - 1};
  for (const float bad_value : kBadValues) {
    for (const size_t pos : kPositions) {
      SCOPED_TRACE("bad value " + std::to_string(bad_value) + " at " + std::to_string(pos));
      auto s = streams(desc, 1);
      ASSERT_EQ(s.size(), 1u);
      for (uint64_t step = 0; step < 3; ++step) {  // a non-zero residual and warm codec state
        step_one(*s[0], make_gradient(Dist::kLaplace, n, 300 + step), step);
      }
      const std::vector<float> before(s[0]->residual().begin(), s[0]->residual().end());
      auto grad = make_gradient(Dist::kLaplace, n, 400);
      grad[pos] = bad_value;
      StepContext ctx;
      ctx.step = 3;
      auto frame = test_util::encode_frame(*codec_, 0, ctx, grad, *s[0]);
      ASSERT_FALSE(frame.ok());
      EXPECT_EQ(frame.status().code(), ErrorCode::kNonFiniteGradient) << frame.status().to_string();

      const auto after = s[0]->residual();
      ASSERT_EQ(after.size(), before.size());
      size_t changed = 0;
      for (size_t i = 0; i < after.size(); ++i) {
        const double tol = 1e-6 * (std::fabs(before[i]) + (i == pos ? 0.0 : std::fabs(grad[i])));
        if (!(std::fabs(static_cast<double>(after[i]) - before[i]) <= tol) && ++changed <= 3) {
          ADD_FAILURE() << "residual[" << i << "] was " << before[i] << ", now " << after[i];
        }
      }
      EXPECT_EQ(changed, 0u);
      // The stream is still usable.
      EXPECT_EQ(step_one(*s[0], make_gradient(Dist::kLaplace, n, 401), 4).size(), n);
    }
  }
}

TEST_P(CodecContractTest, DecodeRejectsWrongSizeAndForeignFrameWithoutTouchingAcc) {
  const TensorDesc desc = test_util::matrix_desc(32, 40);
  const size_t n = desc.elements;
  auto s = streams(desc, 1);
  ASSERT_EQ(s.size(), 1u);
  const auto grad = make_gradient(Dist::kLaplace, n, 5);
  StepContext ctx;
  ctx.step = 2;
  auto out = test_util::run_step(*codec_, test_util::stream_pointers(s), std::span(&grad, 1), ctx);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Bytes& frame = out->frames.back()[0];

  const auto pattern = [](size_t size) {
    std::vector<float> acc(size);
    for (size_t i = 0; i < size; ++i) acc[i] = 0.25f + static_cast<float>(i);
    return acc;
  };
  for (const size_t size : {n - 1, n + 1, size_t{0}}) {
    std::vector<float> acc = pattern(size);
    const Status st = test_util::decode_frame(*codec_, frame, s[0].get(), acc);
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument)
        << "acc of " << size << ": " << st.to_string();
    EXPECT_EQ(acc, pattern(size)) << "acc of " << size << " was written";
  }

  const char* foreign_spec = params_.id == CodecId::kNone ? "fp16" : "none";
  auto foreign = test_util::make_codec(foreign_spec);
  ASSERT_TRUE(foreign.ok());
  auto foreign_stream = (*foreign)->make_stream(desc);
  ASSERT_TRUE(foreign_stream.ok());
  auto foreign_frame = test_util::encode_frame(**foreign, 0, ctx, grad, **foreign_stream);
  ASSERT_TRUE(foreign_frame.ok()) << foreign_frame.status().to_string();
  std::vector<float> acc = pattern(n);
  const Status st = test_util::decode_frame(*codec_, *foreign_frame, s[0].get(), acc);
  EXPECT_EQ(st.code(), ErrorCode::kIncompatible) << st.to_string();
  EXPECT_EQ(acc, pattern(n)) << "a " << foreign_spec << " frame was decoded";
}

TEST_P(CodecContractTest, GradientBeyondFp16RangeEncodesDecodablyOrIsRejected) {
  expect_large_gradient_handled(1e5f);
}

// Near FLT_MAX: bf16 rounds to infinity, float sums of |g| overflow.
TEST_P(CodecContractTest, GradientNearFloatMaxEncodesDecodablyOrIsRejected) {
  expect_large_gradient_handled(3.4e38f);
}

// Finite gradients whose sum leaves the codec's number range (fp16's 65504, fp32's FLT_MAX): the
// step is skipped (kNonFiniteGradient, as DDP's all-reduce would overflow to infinity and loss
// scaling would skip it), or the sum decodes finite; never a frame blamed as malformed. A skipped
// step's values are dropped, so that the job goes on: a codec that held them in its residual
// (randomk) skips each step that sends some of them, at most one per element.
TEST_P(SummableCodecTest, ASumBeyondTheNumberRangeSkipsTheStepOrStaysFinite) {
  constexpr size_t kWorkers = 2;
  constexpr size_t kLarge[] = {5, 6, 7, 8};
  const TensorDesc desc = test_util::matrix_desc(64, 64);
  const size_t n = desc.elements;
  auto s = streams(desc, kWorkers);
  ASSERT_EQ(s.size(), kWorkers);
  const float magnitude = params_.id == CodecId::kFp16 ? 40000.0f : 2e38f;
  std::vector<std::vector<float>> grads;
  for (size_t w = 0; w < kWorkers; ++w) {
    grads.push_back(make_gradient(Dist::kLaplace, n, 700 + w));
    for (const size_t i : kLarge) grads[w][i] = magnitude;  // the same elements everywhere
  }
  StepContext ctx;
  size_t skipped = 0;
  for (ctx.step = 0; ctx.step < 100; ++ctx.step) {
    auto out = test_util::run_step(*codec_, test_util::stream_pointers(s), grads, ctx);
    if (out.ok()) {
      for (size_t i = 0; i < n; ++i) ASSERT_TRUE(std::isfinite(out->decoded[0][i])) << i;
    } else {
      ASSERT_EQ(out.status().code(), ErrorCode::kNonFiniteGradient) << out.status().to_string();
      ++skipped;
    }
    for (size_t w = 0; w < kWorkers; ++w) {
      grads[w] = make_gradient(Dist::kLaplace, n, 710 + 2 * ctx.step + w);
    }
  }
  EXPECT_LE(skipped, std::size(kLarge)) << "steps without large values were skipped";
}

std::string spec_name(const ::testing::TestParamInfo<std::string>& param_info) {
  return test_util::spec_test_name(param_info.param);
}

INSTANTIATE_TEST_SUITE_P(AllCodecs, CodecContractTest,
                         ::testing::ValuesIn(test_util::codec_specs()), spec_name);
INSTANTIATE_TEST_SUITE_P(SummableCodecs, SummableCodecTest,
                         ::testing::ValuesIn(test_util::specs_where_summable(true)), spec_name);
INSTANTIATE_TEST_SUITE_P(NonSummableCodecs, NonSummableCodecTest,
                         ::testing::ValuesIn(test_util::specs_where_summable(false)), spec_name);
INSTANTIATE_TEST_SUITE_P(Powersgd, PowersgdContractTest, ::testing::Values("powersgd:rank=4"),
                         spec_name);

// ---- qsgd headroom ---------------------------------------------------------------------------

struct QsgdHeadroomCase {
  int bits;
  int workers;
};

class QsgdHeadroomTest : public ::testing::TestWithParam<QsgdHeadroomCase> {};

// Every element of every worker's gradient sits at the agreed scale, so each frame holds the top
// level +-(2^bits - 1) everywhere, with the same signs on every worker: the worst case for the sum.
TEST_P(QsgdHeadroomTest, SumOfWorkersFramesAtMaxLevelDoesNotOverflow) {
  const auto [bits, workers] = GetParam();
  auto codec = test_util::make_codec("qsgd:bits=" + std::to_string(bits) +
                                     ",workers=" + std::to_string(workers));
  ASSERT_TRUE(codec.ok()) << codec.status().to_string();
  TensorDesc desc;
  desc.elements = 1027;
  std::vector<float> grad(desc.elements);
  for (size_t i = 0; i < grad.size(); ++i) grad[i] = i % 3 == 0 ? -1.0f : 1.0f;

  StepContext ctx;
  ctx.step = 1;
  ctx.agreed_scale = 1.0f;
  std::vector<Bytes> frames;
  for (int w = 0; w <= workers; ++w) {  // one frame more than the codec reserved room for
    auto stream = (*codec)->make_stream(desc);
    ASSERT_TRUE(stream.ok());
    ctx.worker = static_cast<uint32_t>(w);
    auto frame = test_util::encode_frame(**codec, 0, ctx, grad, **stream);
    ASSERT_TRUE(frame.ok()) << frame.status().to_string();
    frames.push_back(std::move(frame).value());
  }

  Bytes sum = frames[0];
  for (int w = 1; w < workers; ++w) {
    auto next = test_util::add_frame_bytes(**codec, sum, frames[w]);
    ASSERT_TRUE(next.ok()) << "adding frame " << w << ": " << next.status().to_string();
    sum = std::move(next).value();
  }
  std::vector<float> decoded(desc.elements, 0.0f);
  ASSERT_TRUE(test_util::decode_frame(**codec, sum, nullptr, decoded).ok());
  std::vector<float> one(desc.elements, 0.0f);
  ASSERT_TRUE(test_util::decode_frame(**codec, frames[0], nullptr, one).ok());

  const int levels = (1 << bits) - 1;
  const float step = 1.0f / static_cast<float>(levels);
  const float top = static_cast<float>(static_cast<int64_t>(workers) * levels) * step;
  for (size_t i = 0; i < desc.elements; ++i) {
    const float sign = grad[i] < 0 ? -1.0f : 1.0f;
    ASSERT_EQ(decoded[i], sign * top) << "element " << i << " overflowed";
    ASSERT_NEAR(decoded[i], static_cast<double>(workers) * one[i], 1e-6 * workers)
        << "element " << i;
  }

  auto overfull = test_util::add_frame_bytes(**codec, sum, frames[workers]);
  ASSERT_FALSE(overfull.ok()) << workers + 1 << " frames were summed into a " << workers
                              << "-worker frame";
  EXPECT_EQ(overfull.status().code(), ErrorCode::kResourceExhausted);
}

INSTANTIATE_TEST_SUITE_P(BitsAndWorkers, QsgdHeadroomTest,
                         ::testing::Values(QsgdHeadroomCase{1, 2}, QsgdHeadroomCase{4, 2},
                                           QsgdHeadroomCase{6, 2}, QsgdHeadroomCase{8, 2},
                                           QsgdHeadroomCase{15, 2}, QsgdHeadroomCase{1, 8},
                                           QsgdHeadroomCase{4, 8}, QsgdHeadroomCase{8, 8},
                                           QsgdHeadroomCase{12, 8}, QsgdHeadroomCase{1, 64},
                                           QsgdHeadroomCase{4, 64}, QsgdHeadroomCase{8, 64},
                                           QsgdHeadroomCase{9, 64}, QsgdHeadroomCase{15, 64}),
                         [](const ::testing::TestParamInfo<QsgdHeadroomCase>& param_info) {
                           return "bits" + std::to_string(param_info.param.bits) + "_workers" +
                                  std::to_string(param_info.param.workers);
                         });

// The header counts payload bytes in 32 bits: a tensor whose frames would pass 4 GiB is refused
// when its stream is made, before any memory is taken, instead of sending truncated headers.
TEST(CodecStreamTest, TensorsWhoseFramesPassTheFourGibLimitAreRefused) {
  const struct {
    const char* spec;
    TensorDesc desc;
  } refused[] = {
      {"none", {.elements = uint64_t{1} << 30}},  // 4 bytes an element
      {"fp16", {.elements = uint64_t{1} << 31}},
      {"qsgd:bits=15,workers=1024", {.elements = uint64_t{1} << 30}},  // 4-byte levels
      {"powersgd:rank=2", {.elements = uint64_t{3} << 30, .rows = uint64_t{1} << 30, .cols = 3}},
  };
  for (const auto& c : refused) {
    SCOPED_TRACE(c.spec);
    auto codec = test_util::make_codec(c.spec);
    ASSERT_TRUE(codec.ok()) << codec.status().to_string();
    const auto stream = (*codec)->make_stream(c.desc);
    ASSERT_EQ(stream.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(stream.status().message().find("beyond the 4 GiB limit of a frame"),
              std::string::npos)
        << stream.status().message();
  }
  auto none = test_util::make_codec("none");  // no residual: the largest tensor that fits is cheap
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE((*none)->make_stream({.elements = (uint64_t{1} << 30) - 1}).ok());
}

}  // namespace
}  // namespace gradgate::kernels
