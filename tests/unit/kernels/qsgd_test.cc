// Tests of the qsgd codec (kernels/cpu/qsgd_codec.cc): unbiased stochastic rounding, reproducible
// Philox streams, the agreed scale, the level bound and the wire integer width.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "element_frames.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/frame.h"
#include "gradient_data.h"
#include "loops.h"

namespace gradgate::kernels {
namespace {

constexpr size_t kScaleBytes = 4;  // payload: [f32 scale][n integers]

std::unique_ptr<Codec> make_codec(const std::string& spec) {
  auto params = parse_codec_spec(spec);
  EXPECT_TRUE(params.ok()) << params.status().to_string();
  if (!params.ok()) return nullptr;
  auto codec = make_cpu_codec(*params);
  EXPECT_TRUE(codec.ok()) << codec.status().to_string();
  return codec.ok() ? std::move(codec).value() : nullptr;
}

std::unique_ptr<Stream> make_stream(const Codec& codec, const TensorDesc& desc) {
  auto stream = codec.make_stream(desc);
  EXPECT_TRUE(stream.ok()) << stream.status().to_string();
  return stream.ok() ? std::move(stream).value() : nullptr;
}

// Encodes one frame; an empty vector (and a test failure) on error.
std::vector<std::byte> encode(const Codec& codec, Stream& stream, std::span<const float> grad,
                              const StepContext& ctx) {
  std::vector<std::byte> buf(codec.max_frame_bytes(stream.desc()));
  auto size = codec.encode(0, ctx, grad, stream, buf);
  EXPECT_TRUE(size.ok()) << size.status().to_string();
  if (!size.ok()) return {};
  buf.resize(*size);
  return buf;
}

FrameView parse(const std::vector<std::byte>& frame) {
  auto view = parse_frame(frame);
  EXPECT_TRUE(view.ok()) << view.status().to_string();
  return view.ok() ? *view : FrameView{};
}

float frame_scale(const FrameView& frame) {
  float scale = 0.0f;
  std::memcpy(&scale, frame.payload.data(), sizeof scale);
  return scale;
}

// The integer levels of a frame, widened.
std::vector<int64_t> frame_levels(const FrameView& frame) {
  const size_t n = frame.header.element_count;
  const size_t width = (frame.payload.size() - kScaleBytes) / n;
  const std::byte* ints = frame.payload.data() + kScaleBytes;
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (width == 1) {
      int8_t v;
      std::memcpy(&v, ints + i, 1);
      out[i] = v;
    } else if (width == 2) {
      int16_t v;
      std::memcpy(&v, ints + 2 * i, 2);
      out[i] = v;
    } else {
      int32_t v;
      std::memcpy(&v, ints + 4 * i, 4);
      out[i] = v;
    }
  }
  return out;
}

std::vector<float> decode(const Codec& codec, const FrameView& frame) {
  std::vector<float> acc(frame.header.element_count, 0.0f);
  const Status st = codec.decode_accumulate(frame, nullptr, acc);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return acc;
}

// ---- unbiased stochastic rounding ------------------------------------------------------------

TEST(QsgdTest, StochasticRoundingIsUnbiased) {
  constexpr int kSteps = 2000;
  constexpr size_t n = 67;  // not a multiple of the 4 Philox lanes
  const auto codec = make_codec("qsgd:bits=2,workers=1,ef=0");
  ASSERT_NE(codec, nullptr);
  // Values spread over [-1, 1] with irregular fractions of a level; g[0] = 1 fixes the scale.
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) {
    g[i] = static_cast<float>(std::sin(1.7 * static_cast<double>(i) + 0.3));
  }
  g[0] = 1.0f;
  g[1] = 1e-3f;         // rarely rounded up
  g[2] = -2.0f / 3.0f;  // on a level (up to float rounding)
  const auto stream = make_stream(*codec, {.job_id = 1, .tensor_id = 4, .elements = n});
  ASSERT_NE(stream, nullptr);

  std::vector<double> sum(n, 0.0);
  for (int step = 0; step < kSteps; ++step) {
    const StepContext ctx{.step = static_cast<uint64_t>(step), .worker = 2, .job_seed = 77};
    const auto frame = encode(*codec, *stream, g, ctx);
    ASSERT_FALSE(frame.empty());
    const auto view = parse(frame);
    ASSERT_EQ(frame_scale(view), 1.0f);
    const auto decoded = decode(*codec, view);
    for (size_t i = 0; i < n; ++i) sum[i] += decoded[i];
  }

  // Each decoded value is step * (l or l + 1) with P(l + 1) = p, the fraction of |v| / step.
  const double step_size = 1.0 / 3.0;
  double total_bias = 0.0, total_variance = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double x = std::fabs(static_cast<double>(g[i])) / step_size;
    const double p = x - std::floor(x);
    const double se = step_size * std::sqrt(p * (1.0 - p) / kSteps);
    const double mean = sum[i] / kSteps;
    const double bias = mean - static_cast<double>(g[i]);
    // 4.5 standard errors per element keeps 67 independent checks from failing by chance
    // (3 would, for one of them, about 17% of seeds); the pooled check below is at 3.
    EXPECT_LE(std::fabs(bias), 4.5 * se + 1e-6)
        << "element " << i << " value " << g[i] << " mean " << mean << " se " << se;
    total_bias += bias;
    total_variance += se * se;
  }
  EXPECT_LE(std::fabs(total_bias), 3.0 * std::sqrt(total_variance) + 1e-5)
      << "summed bias " << total_bias << " over " << n << " elements";
}

// ---- reproducibility -------------------------------------------------------------------------

// Fraction of elements whose levels differ between two frames of the same values.
double fraction_differing(const FrameView& a, const FrameView& b) {
  const auto la = frame_levels(a), lb = frame_levels(b);
  size_t differ = 0;
  for (size_t i = 0; i < la.size(); ++i) differ += la[i] != lb[i];
  return static_cast<double>(differ) / static_cast<double>(la.size());
}

TEST(QsgdTest, SameSeedWorkerAndStepGiveIdenticalFrames) {
  constexpr size_t n = 1001;
  const auto codec = make_codec("qsgd:bits=4,workers=8");
  ASSERT_NE(codec, nullptr);
  const TensorDesc desc{.job_id = 2, .tensor_id = 5, .elements = n};
  const auto g = bench::make_gradient(bench::Dist::kGaussian, n, 8);
  const StepContext ctx{.step = 12, .worker = 3, .job_seed = 99, .agreed_scale = 0.01f};

  const auto frame_for = [&](const StepContext& c) {
    const auto stream = make_stream(*codec, desc);
    return stream ? encode(*codec, *stream, g, c) : std::vector<std::byte>{};
  };
  const auto reference = frame_for(ctx);
  ASSERT_FALSE(reference.empty());
  EXPECT_EQ(frame_for(ctx), reference);
  for (cpu::Isa isa : {cpu::Isa::kBaseline, cpu::Isa::kAvx2}) {
    cpu::force_isa(isa);
    EXPECT_EQ(frame_for(ctx), reference) << "isa " << cpu::loops().isa;
  }
  cpu::force_isa(cpu::best_isa());

  // Each input of the random stream changes the rounding of about a third of the elements
  // (2 p (1 - p) averaged over p), not just a few.
  StepContext other_worker = ctx, other_step = ctx, other_seed = ctx;
  other_worker.worker = 4;
  other_step.step = 13;
  other_seed.job_seed = 100;
  for (const auto& [name, c] : {std::pair{"worker", other_worker}, std::pair{"step", other_step},
                                std::pair{"job seed", other_seed}}) {
    const auto frame = frame_for(c);
    ASSERT_FALSE(frame.empty());
    const auto a = parse(reference), b = parse(frame);
    EXPECT_EQ(frame_scale(a), frame_scale(b)) << name;
    EXPECT_GT(fraction_differing(a, b), 0.15) << "different " << name;
  }
}

// ---- agreed scale ----------------------------------------------------------------------------

TEST(QsgdTest, AgreedScaleIsTheFramesScale) {
  constexpr size_t n = 512;
  const auto codec = make_codec("qsgd:bits=4,workers=8");
  ASSERT_NE(codec, nullptr);
  ASSERT_TRUE(codec->needs_agreed_scale());
  const TensorDesc desc{.tensor_id = 1, .elements = n};
  const auto g = bench::make_gradient(bench::Dist::kLaplace, n, 3);
  const auto stream = make_stream(*codec, desc);
  ASSERT_NE(stream, nullptr);
  const float local = codec->local_scale(g, *stream);
  float max_abs = 0.0f;
  for (float v : g) max_abs = std::max(max_abs, std::fabs(v));
  ASSERT_EQ(local, max_abs);

  for (float agreed : {0.0f, local, 2.5f * local, 1000.0f * local}) {
    const auto fresh = make_stream(*codec, desc);
    const StepContext ctx{.step = 1, .agreed_scale = agreed};
    const auto frame = encode(*codec, *fresh, g, ctx);
    ASSERT_FALSE(frame.empty());
    const auto view = parse(frame);
    EXPECT_EQ(frame_scale(view), agreed > 0.0f ? agreed : local) << "agreed " << agreed;
    const auto levels = frame_levels(view);
    for (size_t i = 0; i < n; ++i) {
      // |l| is floor(|v| * 15 / scale + u): at most one above the scaled magnitude.
      const double scaled = std::fabs(g[i]) * 15.0 / static_cast<double>(frame_scale(view));
      ASSERT_LE(static_cast<double>(std::llabs(levels[i])), scaled + 1.0) << "element " << i;
      ASSERT_GE(static_cast<double>(std::llabs(levels[i])), scaled - 1.0) << "element " << i;
    }
  }
}

// ---- level bound -----------------------------------------------------------------------------

TEST(QsgdTest, LevelsNeverExceedTheLevelCount) {
  constexpr size_t n = 999;
  for (int bits : {1, 2, 3, 4, 7, 8, 15}) {
    const std::string spec = "qsgd:bits=" + std::to_string(bits) + ",workers=4";
    SCOPED_TRACE(spec);
    const auto codec = make_codec(spec);
    ASSERT_NE(codec, nullptr);
    const int64_t max_level = (int64_t{1} << bits) - 1;
    const auto stream = make_stream(*codec, {.tensor_id = 7, .elements = n});
    ASSERT_NE(stream, nullptr);
    int64_t seen_max = 0;
    for (int step = 0; step < 20; ++step) {
      auto g = bench::make_gradient(bench::Dist::kStudentT3, n, 50 + static_cast<uint64_t>(step));
      g[0] = 1.0f;  // elements at the scale: |v| * levels / scale rounds to just over `levels`
      g[1] = -1.0f;
      g[2] = std::nextafter(1.0f, 0.0f);
      for (size_t i = 3; i < n; ++i) g[i] = std::clamp(g[i] * 200.0f, -1.0f, 1.0f);
      // Alternate a local scale, the exact maximum, and an agreed scale below it (clamped).
      const float local = codec->local_scale(g, *stream);
      const float agreed = step % 3 == 0 ? 0.0f : step % 3 == 1 ? local : 0.5f * local;
      const StepContext ctx{.step = static_cast<uint64_t>(step), .agreed_scale = agreed};
      const auto frame = encode(*codec, *stream, g, ctx);
      ASSERT_FALSE(frame.empty());
      for (int64_t level : frame_levels(parse(frame))) {
        ASSERT_LE(std::llabs(level), max_level) << "step " << step;
        seen_max = std::max<int64_t>(seen_max, std::llabs(level));
      }
    }
    EXPECT_EQ(seen_max, max_level) << "the top level is reachable";
  }
}

TEST(QsgdTest, ScaleTooSmallForItsLevelsSendsZerosAndKeepsTheResidual) {
  constexpr size_t n = 1000;  // the vector loops and their scalar tail
  for (const char* spec : {"qsgd:bits=4,workers=8", "qsgd:bits=15,workers=1024"}) {
    SCOPED_TRACE(spec);
    const auto codec = make_codec(spec);
    ASSERT_NE(codec, nullptr);
    const auto stream = make_stream(*codec, {.tensor_id = 3, .elements = n});
    ASSERT_NE(stream, nullptr);
    // Subnormal values and zeros: levels / max|v| overflows a float.
    std::vector<float> g(n, 0.0f);
    for (size_t i = 0; i < n; i += 3) g[i] = (i % 2 ? -1e-39f : 2e-39f);
    const auto frame = encode(*codec, *stream, g, StepContext{.step = 1});
    ASSERT_FALSE(frame.empty());
    const auto view = parse(frame);
    for (int64_t level : frame_levels(view)) ASSERT_EQ(level, 0);
    for (float v : decode(*codec, view)) ASSERT_EQ(v, 0.0f);
    const auto residual = stream->residual();
    ASSERT_TRUE(std::equal(residual.begin(), residual.end(), g.begin()));
  }
}

// A frame counts its summands in 16 bits of its param: with 16 headroom bits a sum may hold
// 65535 frames, not the 65536 the headroom alone would allow (that count would read as 0).
TEST(QsgdTest, SumsHoldNoMoreFramesThanTheSummandFieldCounts) {
  using element_frames::QsgdLayout;
  const QsgdLayout half{4, 16, 32768};
  const auto full = element_frames::qsgd_sum_layout("qsgd", half, {4, 16, 32767}, 1.0f, 1.0f);
  ASSERT_TRUE(full.ok()) << full.status().to_string();
  EXPECT_EQ(QsgdLayout::from_param(full->param()).summands, 65535u);
  const auto over = element_frames::qsgd_sum_layout("qsgd", half, half, 1.0f, 1.0f);
  EXPECT_EQ(over.status().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(over.status().message(),
            "qsgd: summing 65536 frames exceeds the 65535 that a sum may hold (headroom of 16 "
            "bits)");
  // Below 16 headroom bits the headroom is the limit.
  EXPECT_EQ(QsgdLayout({4, 3, 1}).max_summands(), 8u);
}

// ---- wire integer width ----------------------------------------------------------------------

TEST(QsgdTest, IntegerWidthFollowsBitsAndWorkers) {
  constexpr size_t n = 1000;
  const struct {
    const char* spec;
    size_t width;
    uint32_t headroom;
  } cases[] = {
      {"qsgd:bits=4,workers=8", 1, 3},       // 4 + 1 + 3 = 8 bits
      {"qsgd:bits=8,workers=64", 2, 6},      // 8 + 1 + 6 = 15 bits
      {"qsgd:bits=15,workers=1024", 4, 10},  // 15 + 1 + 10 = 26 bits
      {"qsgd:bits=7,workers=1", 1, 0},       // 7 + 1 = 8 bits
      {"qsgd:bits=4,workers=9", 2, 4},       // 4 + 1 + 4 = 9 bits
  };
  const auto g = bench::make_gradient(bench::Dist::kGaussian, n, 2);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.spec);
    const auto codec = make_codec(c.spec);
    ASSERT_NE(codec, nullptr);
    const TensorDesc desc{.elements = n};
    EXPECT_EQ(codec->max_frame_bytes(desc), kFrameHeaderBytes + kScaleBytes + n * c.width);
    const auto stream = make_stream(*codec, desc);
    ASSERT_NE(stream, nullptr);
    const auto frame = encode(*codec, *stream, g, StepContext{});
    ASSERT_EQ(frame.size(), codec->max_frame_bytes(desc));
    const auto view = parse(frame);
    EXPECT_EQ(view.header.param & 0xFFu, static_cast<uint32_t>(parse_codec_spec(c.spec)->bits));
    EXPECT_EQ((view.header.param >> 8) & 0xFFu, c.headroom);
    EXPECT_EQ(view.header.param >> 16, 1u) << "one summand";
  }
}

}  // namespace
}  // namespace gradgate::kernels
