// The host-side rules of the CUDA powersgd codec, run on the CPU against the CPU codec: the matrix
// shape, rank and frame size; the payload checks, with the CPU codec's errors; and the
// host-device arithmetic (the shared basis, Gram-Schmidt, the redrawn columns), which, run by one
// thread, must give the CPU codec's bits. The CUDA kernels run the same code with a thread block.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "codec_data.h"
#include "codec_test_util.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/frame.h"
#include "powersgd_layout.h"
#include "powersgd_math.h"

namespace gradgate::kernels {
namespace {

namespace psgd = cuda::powersgd;
using test_util::Bytes;

constexpr uint64_t kJobSeed = 0x5EED;
constexpr uint32_t kTensor = 17;

// The Team of one thread.
struct SerialTeam {
  uint32_t rank() const { return 0; }
  uint32_t size() const { return 1; }
  double sum(double part) const { return part; }
};

std::unique_ptr<Codec> cpu_powersgd(int rank, bool error_feedback = false) {
  CodecParams params;
  params.id = CodecId::kPowersgd;
  params.rank = rank;
  params.error_feedback = error_feedback;
  return make_cpu_codec(params).value();
}

TensorDesc desc_of(size_t elements, size_t rows = 0, size_t cols = 0) {
  TensorDesc d;
  d.job_id = 3;
  d.tensor_id = kTensor;
  d.elements = elements;
  d.rows = rows;
  d.cols = cols;
  return d;
}

StepContext context(uint64_t step) {
  StepContext ctx;
  ctx.step = step;
  ctx.job_seed = kJobSeed;
  return ctx;
}

std::vector<float> values_of(const Bytes& frame) {
  const FrameView view = parse_frame(frame).value();
  std::vector<float> values((view.payload.size() - psgd::kShapeBytes) / sizeof(float));
  std::memcpy(values.data(), view.payload.data() + psgd::kShapeBytes,
              values.size() * sizeof(float));
  return values;
}

// The k x k identity: its round-0 frame is Q itself, its round-1 frame P_hat itself (every
// product has one non-zero term, so the CPU codec computes them exactly).
std::vector<float> identity(size_t k) {
  std::vector<float> m(k * k, 0.0f);
  for (size_t i = 0; i < k; ++i) m[i * k + i] = 1.0f;
  return m;
}

TEST(PowersgdDeviceRules, ShapeRankAndFrameSizeMatchTheCpuCodec) {
  for (int rank : {1, 4, 64}) {
    auto codec = cpu_powersgd(rank);
    std::vector<TensorDesc> descs = {desc_of(64 * 48, 64, 48), desc_of(100 * 2, 100, 2),
                                     desc_of(3, 3, 1), desc_of(1000, 10, 10), desc_of(1000, 0, 10)};
    for (size_t n = 1; n <= 300; ++n) descs.push_back(desc_of(n));
    descs.push_back(desc_of(1000003));
    for (const TensorDesc& d : descs) {
      SCOPED_TRACE(std::to_string(d.elements) + " as " + std::to_string(d.rows) + " x " +
                   std::to_string(d.cols) + ", rank " + std::to_string(rank));
      auto shape = psgd::matrix_shape(d, rank);
      auto stream = codec->make_stream(d);
      ASSERT_EQ(shape.ok(), stream.ok());
      if (!stream.ok()) {
        EXPECT_EQ(shape.status().code(), stream.status().code());
        EXPECT_EQ(shape.status().message(), stream.status().message());
        continue;
      }
      EXPECT_EQ(psgd::max_frame_bytes(*shape), codec->max_frame_bytes(d));
      const Bytes frame = test_util::encode_frame(*codec, 0, context(0),
                                                  std::vector<float>(d.elements, 1.0f), **stream)
                              .value();
      const FrameView view = parse_frame(frame).value();
      uint32_t words[2];
      std::memcpy(words, view.payload.data(), sizeof words);
      EXPECT_EQ(words[0], shape->rows);
      EXPECT_EQ(words[1], shape->cols);
      EXPECT_EQ(view.header.param, shape->rank);
      EXPECT_TRUE(psgd::check_header(view).ok());
      EXPECT_TRUE(psgd::check_shape(view, words[0], words[1], 0).ok());
    }
  }
}

// The CPU codec's verdict on a frame against the checks the CUDA codec makes: the header, then
// the shape prefix and the count of bad values that it reads back from the device.
void expect_same_verdict(const Codec& codec, const Stream& stream, const FrameView& frame,
                         const char* what) {
  SCOPED_TRACE(what);
  std::vector<float> acc(stream.desc().elements, 0.0f);
  const Status cpu = codec.decode_accumulate(frame, &stream, acc);
  Status ours = psgd::check_header(frame);
  if (ours.ok()) {
    uint32_t words[2];
    std::memcpy(words, frame.payload.data(), sizeof words);
    size_t bad = 0;
    for (size_t at = psgd::kShapeBytes; at + sizeof(float) <= frame.payload.size();
         at += sizeof(float)) {
      float v;
      std::memcpy(&v, frame.payload.data() + at, sizeof v);
      bad += !std::isfinite(v);
    }
    ours = psgd::check_shape(frame, words[0], words[1], bad).status();
  }
  ASSERT_FALSE(cpu.ok());
  EXPECT_EQ(ours.code(), cpu.code());
  EXPECT_EQ(ours.message(), cpu.message());
}

TEST(PowersgdDeviceRules, PayloadChecksGiveTheCpuCodecsErrors) {
  auto codec = cpu_powersgd(4);
  const TensorDesc d = desc_of(1000);
  auto stream = codec->make_stream(d).value();
  std::vector<Stream*> streams{stream.get()};
  const std::vector<std::vector<float>> grads{test_util::make_finite_values(1000, 1)};
  const auto step = test_util::run_step(*codec, streams, grads, context(0)).value();
  const Bytes& good = step.sums[1];
  const FrameView base = parse_frame(good).value();

  auto with_payload = [&](Bytes& payload) {
    FrameView f = base;
    f.payload = payload;
    return f;
  };
  FrameView f = base;
  f.payload = base.payload.first(base.payload.size() - 4);
  expect_same_verdict(*codec, *stream, f, "short payload");
  f.payload = base.payload.first(5);
  expect_same_verdict(*codec, *stream, f, "shorter than the shape");
  for (uint32_t param : {0u, 65u}) {
    f = base;
    f.header.param = param;
    expect_same_verdict(*codec, *stream, f, "rank out of range");
  }
  f = base;
  f.header.flags = 1;
  expect_same_verdict(*codec, *stream, f, "flags");
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    Bytes payload(base.payload.begin(), base.payload.end());
    std::memcpy(payload.data() + 8 + 4 * 17, &bad, 4);
    expect_same_verdict(*codec, *stream, with_payload(payload), "bad value");
  }
  for (const auto& [rows, cols] : std::vector<std::pair<uint32_t, uint32_t>>{
           {31, 32}, {33, 32}, {0, 32}, {32, 0}, {1000, 1}, {0xFFFFFFFFu, 0xFFFFFFFFu}}) {
    Bytes payload(base.payload.begin(), base.payload.end());
    std::memcpy(payload.data(), &rows, 4);
    std::memcpy(payload.data() + 4, &cols, 4);
    expect_same_verdict(*codec, *stream, with_payload(payload), "shape");
  }
  Bytes narrow(8 + 4 * 4);  // 1000 x 1: a valid shape whose rank 4 exceeds its smaller side
  const uint32_t shape[2] = {1000, 1};
  std::memcpy(narrow.data(), shape, sizeof shape);
  expect_same_verdict(*codec, *stream, with_payload(narrow), "rank above the shape");

  Bytes other(8 + 4 * 40 * 4);  // 25 x 40: well formed, but not the stream's shape
  const uint32_t other_shape[2] = {25, 40};
  std::memcpy(other.data(), other_shape, sizeof other_shape);
  const FrameView mismatch = with_payload(other);
  auto parsed = psgd::check_shape(mismatch, 25, 40, 0);
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  std::vector<float> acc(1000, 0.0f);
  const Status cpu = codec->decode_accumulate(mismatch, stream.get(), acc);
  const Status ours =
      psgd::check_stream_matches(codec->spec(), mismatch, *parsed, 1000, *psgd::matrix_shape(d, 4));
  EXPECT_EQ(ours.code(), cpu.code());
  EXPECT_EQ(ours.message(), cpu.message());
}

TEST(PowersgdDeviceRules, TheFirstBasisIsTheCpuCodecsBitForBit) {
  for (const auto& [k, rank] : std::vector<std::pair<size_t, int>>{{1, 4}, {7, 3}, {40, 8}}) {
    auto codec = cpu_powersgd(rank);
    const TensorDesc d = desc_of(k * k, k, k);
    auto stream = codec->make_stream(d).value();
    const Bytes frame =
        test_util::encode_frame(*codec, 0, context(0), identity(k), *stream).value();
    const auto r = static_cast<uint32_t>(psgd::rank_for({k, k, 0}, rank));
    std::vector<float> q(k * r, 0.0f);
    SerialTeam team;
    const uint64_t key = psgd::basis_key(kJobSeed, kTensor);
    for (uint32_t c = 0; c < r; ++c) psgd::normalise_column(team, q.data(), k, r, c, key, true);
    EXPECT_TRUE(test_util::same_bits(values_of(frame), q)) << k << " x " << k;
  }
}

TEST(PowersgdDeviceRules, GramSchmidtIsTheCpuCodecsBitForBit) {
  // With M = I, round 0 sends P = Q and round 1 sends Q_w = P_hat: the CPU codec's P_hat.
  constexpr size_t kSide = 50;
  constexpr uint32_t kRank = 6;
  auto codec = cpu_powersgd(kRank);
  auto stream = codec->make_stream(desc_of(kSide * kSide, kSide, kSide)).value();
  std::vector<Stream*> streams{stream.get()};
  const std::vector<std::vector<float>> grads{identity(kSide)};
  const auto step = test_util::run_step(*codec, streams, grads, context(0)).value();
  const std::vector<float> p = values_of(step.sums[0]);
  std::vector<float> p_hat(p.size());
  std::vector<double> w(p.size());
  SerialTeam team;
  psgd::orthonormalise(team, p.data(), kSide, kRank, w.data(), p_hat.data());
  EXPECT_TRUE(test_util::same_bits(values_of(step.sums[1]), p_hat));
}

TEST(PowersgdDeviceRules, GramSchmidtZeroesDependentColumns) {
  constexpr size_t kRows = 9;
  constexpr uint32_t kRank = 3;
  std::vector<float> p(kRows * kRank);
  for (size_t i = 0; i < kRows; ++i) {
    p[i * kRank] = static_cast<float>(i) - 4.0f;
    p[i * kRank + 1] = 2.0f * p[i * kRank];  // a multiple of column 0
    p[i * kRank + 2] = static_cast<float>(i % 3);
  }
  std::vector<float> p_hat(p.size());
  std::vector<double> w(p.size());
  SerialTeam team;
  psgd::orthonormalise(team, p.data(), kRows, kRank, w.data(), p_hat.data());
  double norm0 = 0.0, norm2 = 0.0, dot02 = 0.0;
  for (size_t i = 0; i < kRows; ++i) {
    EXPECT_EQ(p_hat[i * kRank + 1], 0.0f) << i;
    norm0 += double{p_hat[i * kRank]} * p_hat[i * kRank];
    norm2 += double{p_hat[i * kRank + 2]} * p_hat[i * kRank + 2];
    dot02 += double{p_hat[i * kRank]} * p_hat[i * kRank + 2];
  }
  EXPECT_NEAR(norm0, 1.0, 1e-6);
  EXPECT_NEAR(norm2, 1.0, 1e-6);
  EXPECT_NEAR(dot02, 0.0, 1e-6);
}

TEST(PowersgdDeviceRules, ZeroedColumnsAreRedrawnLikeTheCpuCodec) {
  // A zero gradient zeroes the summed Q of step 0; the next step's P = I Q shows the redrawn Q.
  constexpr size_t kSide = 12;
  constexpr uint32_t kRank = 2;
  auto codec = cpu_powersgd(kRank);
  auto stream = codec->make_stream(desc_of(kSide * kSide, kSide, kSide)).value();
  std::vector<Stream*> streams{stream.get()};
  const std::vector<std::vector<float>> zero{std::vector<float>(kSide * kSide, 0.0f)};
  ASSERT_TRUE(test_util::run_step(*codec, streams, zero, context(0)).ok());
  const Bytes next =
      test_util::encode_frame(*codec, 0, context(1), identity(kSide), *stream).value();

  std::vector<float> q(kSide * kRank, 0.0f);  // the summed Q of step 0
  SerialTeam team;
  const uint64_t key = psgd::redraw_key(psgd::basis_key(kJobSeed, kTensor), 0);
  for (uint32_t c = 0; c < kRank; ++c)
    psgd::normalise_column(team, q.data(), kSide, kRank, c, key, false);
  EXPECT_TRUE(test_util::same_bits(values_of(next), q));
}

TEST(PowersgdDeviceRules, NormalisingKeepsNonZeroColumnsAndScalesThem) {
  std::vector<float> q = {3.0f, 0.0f, 4.0f, 0.0f};  // 2 x 2: column 0 is (3, 4), column 1 zero
  SerialTeam team;
  psgd::normalise_column(team, q.data(), 2, 2, 0, 1, false);
  EXPECT_EQ(q[0], 0.6f);
  EXPECT_EQ(q[2], 0.8f);
  psgd::normalise_column(team, q.data(), 2, 2, 1, 1, false);  // drawn from key 1, then scaled
  const double u1 = psgd::shared_uniform(1, 1), u3 = psgd::shared_uniform(1, 3);
  EXPECT_NEAR(q[1], u1 / std::sqrt(u1 * u1 + u3 * u3), 1e-6);
  EXPECT_NEAR(q[3], u3 / std::sqrt(u1 * u1 + u3 * u3), 1e-6);
}

}  // namespace
}  // namespace gradgate::kernels
