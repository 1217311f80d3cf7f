// powersgd: low-rank recovery, the error-feedback invariant, summability across workers, the
// matrix-shape rule, and rejection of malformed frames and non-finite gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/frame.h"
#include "gradient_data.h"

namespace gradgate::kernels {
namespace {

using bench::Dist;
using bench::make_gradient;
using Bytes = std::vector<std::byte>;

std::unique_ptr<Codec> make_powersgd(int rank, bool error_feedback) {
  CodecParams params;
  params.id = CodecId::kPowersgd;
  params.rank = rank;
  params.error_feedback = error_feedback;
  auto codec = make_cpu_codec(params);
  EXPECT_TRUE(codec.ok()) << codec.status().to_string();
  return std::move(codec).value();
}

TensorDesc desc_of(size_t elements, size_t rows = 0, size_t cols = 0) {
  TensorDesc d;
  d.job_id = 3;
  d.tensor_id = 17;
  d.elements = elements;
  d.rows = rows;
  d.cols = cols;
  return d;
}

FrameView view(const Bytes& frame) {
  auto parsed = parse_frame(frame);
  EXPECT_TRUE(parsed.ok()) << parsed.status().to_string();
  return *parsed;
}

std::vector<float> residual_of(const Stream& s) {
  return {s.residual().begin(), s.residual().end()};
}

/// P workers of one tensor, driven through the per-step protocol of codec.h.
struct Group {
  const Codec& codec;
  TensorDesc desc;
  std::vector<std::unique_ptr<Stream>> streams;
  uint64_t step = 0;

  Group(const Codec& c, const TensorDesc& d, int workers) : codec(c), desc(d) {
    for (int w = 0; w < workers; ++w) {
      auto s = codec.make_stream(desc);
      EXPECT_TRUE(s.ok()) << s.status().to_string();
      streams.push_back(std::move(s).value());
    }
  }

  StepContext ctx(int worker) const {
    StepContext c;
    c.step = step;
    c.worker = static_cast<uint32_t>(worker);
    c.job_seed = 0x5eed;
    return c;
  }

  /// encode(round) on every worker, then the add_frames() sum; returns the summed frame.
  Bytes exchange(int round, const std::vector<std::vector<float>>& grads) {
    std::vector<Bytes> frames;
    for (size_t w = 0; w < streams.size(); ++w) {
      Bytes out(codec.max_frame_bytes(desc));
      auto size = codec.encode(round, ctx(static_cast<int>(w)), grads[w], *streams[w], out);
      EXPECT_TRUE(size.ok()) << size.status().to_string();
      out.resize(size.ok() ? *size : 0);
      frames.push_back(std::move(out));
    }
    Bytes sum = frames[0];
    for (size_t w = 1; w < frames.size(); ++w) {
      Bytes out(codec.max_frame_bytes(desc));
      auto size = codec.add_frames(view(sum), view(frames[w]), out);
      EXPECT_TRUE(size.ok()) << size.status().to_string();
      out.resize(size.ok() ? *size : 0);
      sum = std::move(out);
    }
    return sum;
  }

  /// One full step; returns every worker's decoded aggregate and leaves the round-1 sum in
  /// `last_frame`.
  std::vector<std::vector<float>> run_step(const std::vector<std::vector<float>>& grads) {
    for (int round = 0; round < codec.rounds(); ++round) {
      last_frame = exchange(round, grads);
      for (auto& s : streams) {
        const Status st = codec.absorb(round, view(last_frame), *s);
        EXPECT_TRUE(st.ok()) << st.to_string();
      }
    }
    std::vector<std::vector<float>> decoded;
    for (auto& s : streams) {
      std::vector<float> acc(desc.elements, 0.0f);
      const Status st = codec.decode_accumulate(view(last_frame), s.get(), acc);
      EXPECT_TRUE(st.ok()) << st.to_string();
      decoded.push_back(std::move(acc));
    }
    ++step;
    return decoded;
  }

  Bytes last_frame;
};

std::vector<float> gaussian(size_t n, uint64_t seed) {
  return make_gradient(Dist::kGaussian, n, seed, 1.0f);
}

TEST(PowersgdCodec, Properties) {
  auto codec = make_powersgd(4, true);
  EXPECT_EQ(codec->id(), CodecId::kPowersgd);
  EXPECT_TRUE(codec->summable());
  EXPECT_EQ(codec->rounds(), 2);
  EXPECT_FALSE(codec->needs_agreed_scale());
  auto stream = codec->make_stream(desc_of(64 * 48, 64, 48));
  ASSERT_TRUE(stream.ok());
  // residual + Q (48 x 4) + P_hat (64 x 4)
  EXPECT_EQ((*stream)->memory_bytes(), (64 * 48 + 48 * 4 + 64 * 4) * sizeof(float));
  auto no_ef = make_powersgd(4, false)->make_stream(desc_of(64 * 48, 64, 48));
  ASSERT_TRUE(no_ef.ok());
  EXPECT_TRUE((*no_ef)->residual().empty());
  EXPECT_EQ((*no_ef)->memory_bytes(), (48 * 4 + 64 * 4) * sizeof(float));
}

TEST(PowersgdCodec, RecoversAnExactlyLowRankMatrix) {
  constexpr size_t kRows = 64, kCols = 48;
  auto codec = make_powersgd(4, false);
  const auto a1 = gaussian(kRows, 1), a2 = gaussian(kRows, 2);
  const auto b1 = gaussian(kCols, 3), b2 = gaussian(kCols, 4);
  std::vector<float> g(kRows * kCols);
  float max_abs = 0.0f;
  for (size_t i = 0; i < kRows; ++i) {
    for (size_t j = 0; j < kCols; ++j) {
      g[i * kCols + j] = a1[i] * b1[j] + 0.5f * a2[i] * b2[j];
      max_abs = std::max(max_abs, std::abs(g[i * kCols + j]));
    }
  }
  Group group(*codec, desc_of(kRows * kCols, kRows, kCols), 1);
  std::vector<float> decoded;
  for (int step = 0; step < 3; ++step) decoded = group.run_step({g})[0];
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_NEAR(decoded[i], g[i], 1e-4f * max_abs) << "element " << i;
  }
}

TEST(PowersgdCodec, FullRankIsLossless) {
  // With r = rows, P_hat is a whole orthonormal basis; with r = cols, P = M Q spans M's columns.
  // Either way one step decodes the gradient itself (shapes chosen to exercise short rows and
  // tails of the vector loops).
  auto codec = make_powersgd(8, false);
  for (const TensorDesc& d :
       {desc_of(6 * 40, 6, 40), desc_of(40 * 6, 40, 6), desc_of(31), desc_of(21 * 7, 21, 7)}) {
    Group group(*codec, d, 1);
    const auto g = gaussian(d.elements, d.elements);
    const auto decoded = group.run_step({g})[0];
    for (size_t i = 0; i < g.size(); ++i) {
      ASSERT_NEAR(decoded[i], g[i], 1e-4f) << "element " << i << " of " << d.elements;
    }
  }
}

void check_error_feedback_invariant(const TensorDesc& desc) {
  auto codec = make_powersgd(2, true);
  Group group(*codec, desc, 1);
  const size_t n = desc.elements;
  std::vector<double> fed(n, 0.0), out(n, 0.0), scale(n, 0.0);
  for (int step = 0; step < 1000; ++step) {
    const auto g = make_gradient(Dist::kLaplace, n, 1000 + step, 1.0f);
    const auto decoded = group.run_step({g})[0];
    for (size_t i = 0; i < n; ++i) {
      fed[i] += g[i];
      out[i] += decoded[i];
      scale[i] += std::abs(g[i]);
    }
  }
  const auto residual = residual_of(*group.streams[0]);
  double residual_norm = 0.0, fed_norm = 0.0;
  for (size_t i = 0; i < n; ++i) {
    ASSERT_NEAR(fed[i], out[i] + residual[i], 1e-4 * scale[i]) << "element " << i;
    residual_norm += double{residual[i]} * residual[i];
    fed_norm += fed[i] * fed[i];
  }
  // The residual stays bounded: it is far smaller than the sum of 1000 gradients.
  EXPECT_LT(std::sqrt(residual_norm), 0.5 * std::sqrt(fed_norm));
}

TEST(PowersgdCodec, ErrorFeedbackInvariantMatrix) {
  check_error_feedback_invariant(desc_of(40 * 30, 40, 30));
}

TEST(PowersgdCodec, ErrorFeedbackInvariantOneD) { check_error_feedback_invariant(desc_of(1000)); }

TEST(PowersgdCodec, FourWorkersSumAndShareTheBasis) {
  constexpr int kWorkers = 4;
  constexpr size_t kRows = 24, kCols = 20, kN = kRows * kCols;
  auto codec = make_powersgd(3, true);
  Group group(*codec, desc_of(kN, kRows, kCols), kWorkers);
  for (int step = 0; step < 5; ++step) {
    std::vector<std::vector<float>> grads;
    std::vector<double> expected(kN, 0.0), scale(kN, 0.0);
    for (int w = 0; w < kWorkers; ++w) {
      grads.push_back(make_gradient(Dist::kGaussian, kN, 100 * step + w, 1.0f));
      const auto before = residual_of(*group.streams[w]);
      for (size_t i = 0; i < kN; ++i) {
        expected[i] += double{grads[w][i]} + before[i];
        scale[i] += std::abs(grads[w][i]) + std::abs(before[i]);
      }
    }
    const auto decoded = group.run_step(grads);
    // Every worker decodes the same aggregate, bit for bit: they hold identical P_hat.
    for (int w = 1; w < kWorkers; ++w) {
      ASSERT_EQ(std::memcmp(decoded[0].data(), decoded[w].data(), kN * sizeof(float)), 0)
          << "worker " << w << " step " << step;
    }
    std::vector<double> got(decoded[0].begin(), decoded[0].end());
    for (int w = 0; w < kWorkers; ++w) {
      const auto after = residual_of(*group.streams[w]);
      for (size_t i = 0; i < kN; ++i) got[i] += after[i];
    }
    for (size_t i = 0; i < kN; ++i) {
      ASSERT_NEAR(got[i], expected[i], 1e-5 * scale[i] + 1e-6) << "element " << i;
    }
  }
}

TEST(PowersgdCodec, OneDimensionalShapeRule) {
  auto codec = make_powersgd(4, true);
  const TensorDesc d = desc_of(1000);
  EXPECT_EQ(codec->max_frame_bytes(d), kFrameHeaderBytes + 8 + 4 * 32 * 4);
  auto stream = codec->make_stream(d);
  ASSERT_TRUE(stream.ok());
  const auto g = gaussian(1000, 9);
  Bytes out(codec->max_frame_bytes(d));
  StepContext ctx;
  auto size = codec->encode(0, ctx, g, **stream, out);
  ASSERT_TRUE(size.ok()) << size.status().to_string();
  EXPECT_EQ(*size, codec->max_frame_bytes(d));
  out.resize(*size);
  const FrameView f = view(out);
  uint32_t rows = 0, cols = 0;
  std::memcpy(&rows, f.payload.data(), 4);
  std::memcpy(&cols, f.payload.data() + 4, 4);
  EXPECT_EQ(rows, 32u);
  EXPECT_EQ(cols, 32u);
  EXPECT_EQ(f.header.param, 4u);

  // 2-D: the larger side sets the frame size; the rank is capped by the smaller side.
  EXPECT_EQ(codec->max_frame_bytes(desc_of(64 * 48, 64, 48)), kFrameHeaderBytes + 8 + 4 * 64 * 4);
  EXPECT_EQ(codec->max_frame_bytes(desc_of(100 * 2, 100, 2)), kFrameHeaderBytes + 8 + 4 * 100 * 2);
  // Small 1-D tensors: 1 -> 1 x 1, 5 -> 2 x 3 (cols = ceil(sqrt(5)) = 3, rows = 2).
  EXPECT_EQ(codec->max_frame_bytes(desc_of(1)), kFrameHeaderBytes + 8 + 4 * 1 * 1);
  EXPECT_EQ(codec->max_frame_bytes(desc_of(5)), kFrameHeaderBytes + 8 + 4 * 3 * 2);

  for (const TensorDesc& bad :
       {desc_of(1000, 10, 0), desc_of(1000, 0, 10), desc_of(1000, 10, 10), desc_of(1000, 3, 334)}) {
    auto s = codec->make_stream(bad);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), ErrorCode::kInvalidArgument);
  }
  EXPECT_FALSE(codec->make_stream(desc_of(0)).ok());
}

// The frame `base` with a short payload, a bad rank or flags, or a non-finite value: each must be
// rejected as malformed (expect_rejected(frame, code, what) checks one).
template <typename ExpectRejected>
void expect_bad_fields_rejected(const FrameView& base, ExpectRejected&& expect_rejected) {
  {
    FrameView f = base;
    f.payload = f.payload.first(f.payload.size() - 4);
    expect_rejected(f, ErrorCode::kMalformedFrame, "short payload");
  }
  {
    FrameView f = base;
    f.payload = f.payload.first(5);
    expect_rejected(f, ErrorCode::kMalformedFrame, "payload shorter than the shape");
  }
  {
    FrameView f = base;
    f.header.param = 0;
    expect_rejected(f, ErrorCode::kMalformedFrame, "rank 0");
  }
  {
    FrameView f = base;
    f.header.param = 65;
    expect_rejected(f, ErrorCode::kMalformedFrame, "rank 65");
  }
  {
    FrameView f = base;
    f.header.flags = 1;
    expect_rejected(f, ErrorCode::kMalformedFrame, "flags");
  }
  {
    Bytes payload(base.payload.begin(), base.payload.end());
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(payload.data() + 8 + 4 * 17, &nan, 4);
    FrameView f = base;
    f.payload = payload;
    expect_rejected(f, ErrorCode::kMalformedFrame, "NaN value");
  }
  {
    Bytes payload(base.payload.begin(), base.payload.end());
    const float inf = std::numeric_limits<float>::infinity();
    std::memcpy(payload.data() + payload.size() - 4, &inf, 4);
    FrameView f = base;
    f.payload = payload;
    expect_rejected(f, ErrorCode::kMalformedFrame, "infinite value");
  }
}

// The frame `base` with a shape that does not fit the stream's 1000 elements: each must be
// rejected.
template <typename ExpectRejected>
void expect_bad_shapes_rejected(const FrameView& base, ExpectRejected&& expect_rejected) {
  // Shapes that do not fit 1000 elements with less than one row of padding.
  for (const auto& [rows, cols] : std::vector<std::pair<uint32_t, uint32_t>>{
           {31, 32}, {33, 32}, {0, 32}, {32, 0}, {1000, 1}, {0xFFFFFFFFu, 0xFFFFFFFFu}}) {
    Bytes payload(base.payload.begin(), base.payload.end());
    std::memcpy(payload.data(), &rows, 4);
    std::memcpy(payload.data() + 4, &cols, 4);
    FrameView f = base;
    f.payload = payload;
    expect_rejected(f, ErrorCode::kMalformedFrame, "bad padding shape");
  }
  {  // a valid shape whose rank exceeds its smaller side
    Bytes payload(8 + 4 * 1 * 4);
    const uint32_t rows = 1000, cols = 1;
    std::memcpy(payload.data(), &rows, 4);
    std::memcpy(payload.data() + 4, &cols, 4);
    FrameView f = base;
    f.payload = payload;
    expect_rejected(f, ErrorCode::kMalformedFrame, "rank above min(rows, cols)");
  }
  {  // a well-formed frame of another shape than the stream's
    Bytes payload(8 + 4 * 40 * 4);
    const uint32_t rows = 25, cols = 40;
    std::memcpy(payload.data(), &rows, 4);
    std::memcpy(payload.data() + 4, &cols, 4);
    FrameView f = base;
    f.payload = payload;
    expect_rejected(f, ErrorCode::kInvalidArgument, "shape of another stream");
  }
}

TEST(PowersgdCodec, RejectsMalformedFramesWithoutTouchingAcc) {
  auto codec = make_powersgd(4, true);
  const TensorDesc d = desc_of(1000);
  Group group(*codec, d, 1);
  group.run_step({gaussian(1000, 1)});
  const Bytes good = group.last_frame;
  const FrameView base = view(good);
  const Stream* stream = group.streams[0].get();
  const std::vector<float> sentinel(1000, 7.0f);

  auto expect_rejected = [&](const FrameView& f, ErrorCode code, const char* what) {
    std::vector<float> acc = sentinel;
    const Status st = codec->decode_accumulate(f, stream, acc);
    EXPECT_EQ(st.code(), code) << what << ": " << st.to_string();
    EXPECT_EQ(acc, sentinel) << what;
  };

  {  // the good frame decodes
    std::vector<float> acc = sentinel;
    EXPECT_TRUE(codec->decode_accumulate(base, stream, acc).ok());
  }
  expect_bad_fields_rejected(base, expect_rejected);
  expect_bad_shapes_rejected(base, expect_rejected);
  {  // the round-0 frame of the next step
    const Bytes round0 = group.exchange(0, {gaussian(1000, 2)});
    expect_rejected(view(round0), ErrorCode::kInvalidArgument, "round-0 frame");
    // The stream has started a new step: its P_hat no longer fits the old round-1 frame.
    expect_rejected(base, ErrorCode::kInvalidArgument, "stale P_hat");
  }
  {
    std::vector<float> acc = sentinel;
    EXPECT_EQ(codec->decode_accumulate(base, nullptr, acc).code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(acc, sentinel);
  }
  {  // a stream of another codec
    auto none = make_cpu_codec(CodecParams{});
    ASSERT_TRUE(none.ok());
    auto other = (*none)->make_stream(d);
    ASSERT_TRUE(other.ok());
    std::vector<float> acc = sentinel;
    EXPECT_EQ(codec->decode_accumulate(base, other->get(), acc).code(),
              ErrorCode::kInvalidArgument);
    EXPECT_EQ(acc, sentinel);
  }
  {  // absorb validates too, and add_frames
    auto fresh = codec->make_stream(d);
    ASSERT_TRUE(fresh.ok());
    FrameView f = base;
    f.header.param = 0;
    EXPECT_EQ(codec->absorb(1, f, **fresh).code(), ErrorCode::kMalformedFrame);
    Bytes out(codec->max_frame_bytes(d));
    EXPECT_EQ(codec->add_frames(base, f, out).status().code(), ErrorCode::kIncompatible);
    FrameView g = base;
    g.payload = g.payload.first(g.payload.size() - 4);
    FrameView h = g;
    EXPECT_EQ(codec->add_frames(g, h, out).status().code(), ErrorCode::kMalformedFrame);
  }
}

TEST(PowersgdCodec, RoundOneNeedsRoundZeroAbsorbed) {
  auto codec = make_powersgd(4, true);
  const TensorDesc d = desc_of(1000);
  auto stream = codec->make_stream(d);
  ASSERT_TRUE(stream.ok());
  Bytes out(codec->max_frame_bytes(d));
  const auto g = gaussian(1000, 5);
  auto size = codec->encode(1, StepContext{}, g, **stream, out);
  ASSERT_FALSE(size.ok());
  EXPECT_EQ(size.status().code(), ErrorCode::kInvalidArgument);
  for (float e : (*stream)->residual()) ASSERT_EQ(e, 0.0f);
}

TEST(PowersgdCodec, AbsorbRefusesAnotherCodecsFrameAndTheWrongRound) {
  auto codec = make_powersgd(4, true);
  const TensorDesc d = desc_of(1000);
  auto stream = codec->make_stream(d);
  ASSERT_TRUE(stream.ok());
  Bytes out(codec->max_frame_bytes(d));
  auto size = codec->encode(0, StepContext{}, gaussian(1000, 6), **stream, out);
  ASSERT_TRUE(size.ok()) << size.status().to_string();
  out.resize(*size);
  const Status wrong_round = codec->absorb(1, view(out), **stream);
  EXPECT_EQ(wrong_round.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(wrong_round.message().find("absorb of round 1 was given a round 0 frame"),
            std::string::npos)
      << wrong_round.message();
  EXPECT_EQ(codec->absorb(2, view(out), **stream).code(), ErrorCode::kInvalidArgument);
  FrameView other = view(out);
  other.header.codec = CodecId::kTopk;
  const Status incompatible = codec->absorb(0, other, **stream);
  EXPECT_EQ(incompatible.code(), ErrorCode::kIncompatible);
  EXPECT_NE(incompatible.message().find("cannot absorb a topk frame"), std::string::npos)
      << incompatible.message();
  EXPECT_TRUE(codec->absorb(0, view(out), **stream).ok());
}

TEST(PowersgdCodec, NonFiniteGradientLeavesResidual) {
  auto codec = make_powersgd(2, true);
  const TensorDesc d = desc_of(40 * 30, 40, 30);
  Group group(*codec, d, 1);
  for (int step = 0; step < 3; ++step) group.run_step({gaussian(d.elements, 10 + step)});
  const auto before = residual_of(*group.streams[0]);
  ASSERT_NE(before, std::vector<float>(d.elements, 0.0f));

  auto bad = gaussian(d.elements, 20);
  bad[123] = std::numeric_limits<float>::quiet_NaN();
  Bytes out(codec->max_frame_bytes(d));
  auto r0 = codec->encode(0, group.ctx(0), bad, *group.streams[0], out);
  ASSERT_FALSE(r0.ok());
  EXPECT_EQ(r0.status().code(), ErrorCode::kNonFiniteGradient);
  EXPECT_EQ(residual_of(*group.streams[0]), before);

  // A good round 0, then a non-finite gradient in round 1.
  const auto good = gaussian(d.elements, 21);
  const Bytes round0 = group.exchange(0, {good});
  ASSERT_TRUE(codec->absorb(0, view(round0), *group.streams[0]).ok());
  bad = good;
  bad[7] = std::numeric_limits<float>::infinity();
  auto r1 = codec->encode(1, group.ctx(0), bad, *group.streams[0], out);
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.status().code(), ErrorCode::kNonFiniteGradient);
  EXPECT_EQ(residual_of(*group.streams[0]), before);
  // The step can still complete with the good gradient.
  auto ok = codec->encode(1, group.ctx(0), good, *group.streams[0], out);
  EXPECT_TRUE(ok.ok()) << ok.status().to_string();
}

TEST(PowersgdCodec, LargeGradientsKeepEncoding) {
  // The warm-start Q is kept at unit column norm, so P = M Q does not carry the previous
  // gradient's scale into the next step (1e30 * 1e30 would overflow the float range).
  const TensorDesc d = desc_of(32 * 24, 32, 24);
  auto codec = make_powersgd(4, true);
  Group group(*codec, d, 1);
  std::vector<double> fed(d.elements, 0.0), out(d.elements, 0.0), scale(d.elements, 0.0);
  for (int step = 0; step < 5; ++step) {
    const auto g = make_gradient(Dist::kGaussian, d.elements, 50 + step, 1e30f);
    const auto decoded = group.run_step({g})[0];
    for (size_t i = 0; i < d.elements; ++i) {
      fed[i] += g[i];
      out[i] += decoded[i];
      scale[i] += std::abs(g[i]);
    }
  }
  const auto residual = residual_of(*group.streams[0]);
  for (size_t i = 0; i < d.elements; ++i) {
    ASSERT_TRUE(std::isfinite(residual[i])) << i;
    ASSERT_NEAR(fed[i], out[i] + residual[i], 1e-4 * scale[i]) << "element " << i;
  }
}

TEST(PowersgdCodec, RecoversFromAZeroGradient) {
  // A zero gradient zeroes the summed Q; the basis is re-drawn so later steps still compress.
  constexpr size_t kRows = 16, kCols = 12;
  auto codec = make_powersgd(2, false);
  Group group(*codec, desc_of(kRows * kCols, kRows, kCols), 2);
  const std::vector<float> zero(kRows * kCols, 0.0f);
  const auto zero_out = group.run_step({zero, zero});
  EXPECT_EQ(zero_out[0], zero);
  const auto a = gaussian(kRows, 1), b = gaussian(kCols, 2);
  std::vector<float> g(kRows * kCols);
  for (size_t i = 0; i < kRows; ++i) {
    for (size_t j = 0; j < kCols; ++j) g[i * kCols + j] = a[i] * b[j];
  }
  const auto decoded = group.run_step({g, g})[0];
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(decoded[i], 2.0f * g[i], 1e-4f) << i;
}

}  // namespace
}  // namespace gradgate::kernels
