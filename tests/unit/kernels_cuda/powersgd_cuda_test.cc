// powersgd on the GPU against the CPU codec. The GEMMs sum in another order, so values are
// compared within a tolerance (kTolerance of the compared data's scale), never bit for bit:
// frames of both rounds, decoded aggregates and residuals for shapes from 1 element to 2^20 + 3
// (1-D, non-square, rank above a side); frames decoded across the two codecs and a job that mixes
// them; the error-feedback invariant over 100 steps; 4 workers summing; non-finite gradients and
// malformed frames give the CPU codec's errors. Every test skips without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
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
#include "cuda_test_util.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/cuda/device_stream.h"
#include "gradgate/kernels/frame.h"
#include "gradgate/kernels/make_codec_for.h"

namespace gradgate::kernels {
namespace {

using cuda_test::Bytes;
using cuda_test::context;
using cuda_test::DeviceArray;
using cuda_test::DeviceFrame;

/// GPU against CPU: the largest difference allowed, as a fraction of the data's scale.
constexpr double kTolerance = 1e-3;
constexpr uint32_t kJob = 3, kTensor = 17;

class PowersgdGpuTest : public cuda_test::GpuTest {};

TensorDesc desc_of(size_t elements, size_t rows = 0, size_t cols = 0) {
  TensorDesc d;
  d.job_id = kJob;
  d.tensor_id = kTensor;
  d.elements = elements;
  d.rows = rows;
  d.cols = cols;
  return d;
}

std::vector<float> gaussian(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> out(n);
  for (float& v : out) v = normal(rng);
  return out;
}

float max_abs(std::span<const float> values) {
  float m = 0.0f;
  for (float v : values) m = std::max(m, std::fabs(v));
  return m;
}

::testing::AssertionResult close(std::span<const float> expected, std::span<const float> actual,
                                 double scale) {
  if (expected.size() != actual.size()) {
    return ::testing::AssertionFailure() << "sizes " << expected.size() << " vs " << actual.size();
  }
  const double bound = kTolerance * scale + 1e-30;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!(std::fabs(double{expected[i]} - actual[i]) <= bound)) {
      return ::testing::AssertionFailure() << "element " << i << ": " << expected[i] << " vs "
                                           << actual[i] << " (bound " << bound << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<float> values_of(const Bytes& frame) {
  const FrameView view = parse_frame(frame).value();
  std::vector<float> values((view.payload.size() - 8) / sizeof(float));
  std::memcpy(values.data(), view.payload.data() + 8, values.size() * sizeof(float));
  return values;
}

// One implementation of powersgd, CPU or GPU, driven with host vectors: for the GPU, gradients,
// accumulators and frame payloads are copied to the device around each call.
class Side {
 public:
  Side(bool gpu, const std::string& spec) : gpu_(gpu) {
    auto codec = make_codec_for(parse_codec_spec(spec).value(),
                                gpu ? MemoryKind::kDevice : MemoryKind::kHost);
    EXPECT_TRUE(codec.ok()) << codec.status().to_string();
    codec_ = std::move(codec).value();
  }

  const Codec& codec() const { return *codec_; }

  std::vector<std::unique_ptr<Stream>> streams(const TensorDesc& desc, size_t count) const {
    return test_util::make_streams(*codec_, desc, count).value();
  }

  Result<Bytes> encode(int round, StepContext ctx, std::span<const float> grad,
                       Stream& stream) const {
    if (!gpu_) return test_util::encode_frame(*codec_, round, ctx, grad, stream);
    ctx.memory = MemoryKind::kDevice;
    DeviceArray<float> device_grad(grad);
    const Bytes room(codec_->max_frame_bytes(stream.desc()));
    DeviceArray<std::byte> out{std::span<const std::byte>(room)};
    auto size = codec_->encode(round, ctx, device_grad.span(), stream, out.span());
    if (!size.ok()) return size.status();
    return out.download(*size);
  }

  Result<Bytes> add(const FrameView& a, const FrameView& b) const {
    Bytes out(kFrameHeaderBytes + std::max(a.payload.size(), b.payload.size()));
    if (!gpu_) {
      auto size = codec_->add_frames(a, b, out);
      if (!size.ok()) return size.status();
      out.resize(*size);
      return out;
    }
    DeviceFrame da(a), db(b);
    DeviceArray<std::byte> device_out{std::span<const std::byte>(out)};
    auto size = codec_->add_frames(da.view, db.view, device_out.span());
    if (!size.ok()) return size.status();
    return device_out.download(*size);
  }

  Status absorb(int round, const FrameView& frame, Stream& stream) const {
    if (!gpu_) return codec_->absorb(round, frame, stream);
    DeviceFrame device(frame);
    return codec_->absorb(round, device.view, stream);
  }

  /// acc += decoded (acc = decoded when overwrite); on error, acc holds what the codec left.
  Status decode(const FrameView& frame, const Stream* stream, std::vector<float>& acc,
                bool overwrite = false) const {
    if (!gpu_) {
      return overwrite ? codec_->decode(frame, stream, acc)
                       : codec_->decode_accumulate(frame, stream, acc);
    }
    DeviceFrame device(frame);
    DeviceArray<float> device_out{std::span<const float>(acc)};
    const Status status = overwrite
                              ? codec_->decode(device.view, stream, device_out.span())
                              : codec_->decode_accumulate(device.view, stream, device_out.span());
    acc = device_out.download(acc.size());
    return status;
  }

  static std::vector<float> residual(const Stream& stream) {
    return cuda::residual_on_host(stream).value();
  }

 private:
  bool gpu_;
  std::unique_ptr<Codec> codec_;
};

FrameView view(const Bytes& frame) {
  auto parsed = parse_frame(frame);
  EXPECT_TRUE(parsed.ok()) << parsed.status().to_string();  // the device-written CRC verifies
  return parsed.ok() ? *parsed : FrameView{};
}

struct StepResult {
  std::vector<std::vector<Bytes>> frames;   // [round][worker]
  std::vector<Bytes> sums;                  // [round]
  std::vector<std::vector<float>> decoded;  // [worker]
};

// One step of the protocol on `side` for one worker per stream: each round's frames summed with
// add_frames (worker 0 + 1, then + 2, ...) and absorbed by every worker, the round-1 sum decoded.
StepResult run_step(const Side& side, const std::vector<std::unique_ptr<Stream>>& streams,
                    const std::vector<std::vector<float>>& grads, uint64_t step) {
  StepResult out;
  for (int round = 0; round < 2; ++round) {
    auto& frames = out.frames.emplace_back();
    for (size_t w = 0; w < streams.size(); ++w) {
      auto frame = side.encode(round, context(MemoryKind::kHost, step, static_cast<uint32_t>(w)),
                               grads[w], *streams[w]);
      EXPECT_TRUE(frame.ok()) << frame.status().to_string();
      frames.push_back(frame.ok() ? *frame : Bytes{});
    }
    Bytes sum = frames[0];
    for (size_t w = 1; w < frames.size(); ++w) {
      auto next = side.add(view(sum), view(frames[w]));
      EXPECT_TRUE(next.ok()) << next.status().to_string();
      sum = next.ok() ? *next : Bytes{};
    }
    for (auto& stream : streams) {
      const Status status = side.absorb(round, view(sum), *stream);
      EXPECT_TRUE(status.ok()) << status.to_string();
    }
    out.sums.push_back(std::move(sum));
  }
  for (auto& stream : streams) {
    std::vector<float>& acc = out.decoded.emplace_back(stream->desc().elements, 0.0f);
    const Status status = side.decode(view(out.sums[1]), stream.get(), acc);
    EXPECT_TRUE(status.ok()) << status.to_string();
  }
  return out;
}

// The CPU and the GPU codec of one spec, each with `workers` streams of one tensor.
struct Pair {
  Side cpu, gpu;
  std::vector<std::unique_ptr<Stream>> cpu_streams, gpu_streams;

  Pair(const std::string& spec, const TensorDesc& desc, size_t workers = 1)
      : cpu(false, spec),
        gpu(true, spec),
        cpu_streams(cpu.streams(desc, workers)),
        gpu_streams(gpu.streams(desc, workers)) {}
};

struct Shape {
  TensorDesc desc;
  int rank;
};

std::string shape_name(const Shape& s) {
  return std::to_string(s.desc.elements) + " as " + std::to_string(s.desc.rows) + " x " +
         std::to_string(s.desc.cols) + ", rank " + std::to_string(s.rank);
}

const std::vector<Shape> kShapes = {
    {desc_of(1), 4},                       // 1 x 1
    {desc_of(7), 4},                       // 1-D rule: 3 x 3 with padding, rank 3
    {desc_of(1000), 4},                    // 1-D rule: 32 x 32, rank 4
    {desc_of(64 * 48, 64, 48), 4},         // non-square
    {desc_of(48 * 64, 48, 64), 1},         // non-square, rank 1
    {desc_of(30 * 3, 30, 3), 8},           // rank above the smaller side: 3
    {desc_of(50, 1, 50), 4},               // one row: rank 1
    {desc_of(300 * 200, 300, 200), 64},    // the largest rank
    {desc_of((size_t{1} << 20) + 3), 4}};  // 1-D rule: 1023 x 1025, padded

TEST_F(PowersgdGpuTest, PropertiesMatchTheCpuCodec) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(shape_name(s));
    const std::string spec = "powersgd:rank=" + std::to_string(s.rank);
    Pair pair(spec, s.desc);
    EXPECT_TRUE(pair.gpu.codec().summable());
    EXPECT_EQ(pair.gpu.codec().rounds(), 2);
    EXPECT_EQ(pair.gpu.codec().max_frame_bytes(s.desc), pair.cpu.codec().max_frame_bytes(s.desc));
    EXPECT_EQ(pair.gpu_streams[0]->memory_bytes(), pair.cpu_streams[0]->memory_bytes());
  }
  Side cpu(false, "powersgd:rank=4"), gpu(true, "powersgd:rank=4");
  for (const TensorDesc& bad : {desc_of(1000, 10, 0), desc_of(1000, 3, 334), desc_of(0)}) {
    auto expected = cpu.codec().make_stream(bad);
    auto actual = gpu.codec().make_stream(bad);
    ASSERT_FALSE(actual.ok());
    EXPECT_EQ(actual.status().code(), expected.status().code());
    EXPECT_EQ(actual.status().message(), expected.status().message());
  }
}

TEST_F(PowersgdGpuTest, ValuesMatchTheCpuCodecWithinTolerance) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(shape_name(s));
    Pair pair("powersgd:rank=" + std::to_string(s.rank), s.desc);
    for (uint64_t step = 0; step < 3; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const std::vector<std::vector<float>> grads{gaussian(s.desc.elements, 10 + step)};
      const float scale = max_abs(grads[0]) + max_abs(Side::residual(*pair.cpu_streams[0]));
      const StepResult cpu = run_step(pair.cpu, pair.cpu_streams, grads, step);
      const StepResult gpu = run_step(pair.gpu, pair.gpu_streams, grads, step);
      for (int round = 0; round < 2; ++round) {
        const Bytes& expected = cpu.frames[round][0];
        const Bytes& actual = gpu.frames[round][0];
        ASSERT_EQ(actual.size(), expected.size());
        // Header and shape prefix alike, checksum aside.
        EXPECT_EQ(std::memcmp(actual.data(), expected.data(), 44), 0) << "round " << round;
        EXPECT_EQ(std::memcmp(actual.data() + 48, expected.data() + 48, 8), 0);
        const auto values = values_of(expected);
        EXPECT_TRUE(close(values, values_of(actual), max_abs(values))) << "round " << round;
      }
      EXPECT_TRUE(close(cpu.decoded[0], gpu.decoded[0], scale));
      EXPECT_TRUE(
          close(Side::residual(*pair.cpu_streams[0]), Side::residual(*pair.gpu_streams[0]), scale));
      const auto* device = dynamic_cast<const cuda::DeviceStream*>(pair.gpu_streams[0].get());
      ASSERT_NE(device, nullptr);
      EXPECT_EQ(device->last_encode_passes(), 3);  // round 1: M, M^T P_hat, the residual
    }
  }
}

TEST_F(PowersgdGpuTest, FramesDecodeAcrossCpuAndGpu) {
  const TensorDesc d = desc_of(40 * 30, 40, 30);
  Pair pair("powersgd:rank=3", d);
  const std::vector<std::vector<float>> grads{gaussian(d.elements, 5)};
  const StepResult cpu = run_step(pair.cpu, pair.cpu_streams, grads, 0);
  const StepResult gpu = run_step(pair.gpu, pair.gpu_streams, grads, 0);
  const float scale = max_abs(grads[0]);
  const auto acc = gaussian(d.elements, 6);
  for (bool overwrite : {false, true}) {
    SCOPED_TRACE(overwrite ? "decode" : "decode_accumulate");
    std::vector<float> expected = acc, gpu_on_cpu = acc, cpu_on_gpu = acc, own = acc;
    ASSERT_TRUE(
        pair.cpu.decode(view(cpu.sums[1]), pair.cpu_streams[0].get(), expected, overwrite).ok());
    ASSERT_TRUE(
        pair.cpu.decode(view(gpu.sums[1]), pair.cpu_streams[0].get(), gpu_on_cpu, overwrite).ok());
    ASSERT_TRUE(
        pair.gpu.decode(view(cpu.sums[1]), pair.gpu_streams[0].get(), cpu_on_gpu, overwrite).ok());
    ASSERT_TRUE(pair.gpu.decode(view(gpu.sums[1]), pair.gpu_streams[0].get(), own, overwrite).ok());
    const double bound = scale + (overwrite ? 0.0f : max_abs(acc));
    EXPECT_TRUE(close(expected, gpu_on_cpu, bound));
    EXPECT_TRUE(close(expected, cpu_on_gpu, bound));
    EXPECT_TRUE(close(expected, own, bound));
  }
}

TEST_F(PowersgdGpuTest, CpuAndGpuWorkersShareAJob) {
  // Worker 0 on the CPU, worker 1 on the GPU: both absorb the same sums and decode alike.
  const TensorDesc d = desc_of(1000);
  Side cpu(false, "powersgd:rank=4"), gpu(true, "powersgd:rank=4");
  auto cpu_stream = cpu.streams(d, 1), gpu_stream = gpu.streams(d, 1);
  for (uint64_t step = 0; step < 3; ++step) {
    const auto g0 = gaussian(d.elements, 100 + step), g1 = gaussian(d.elements, 200 + step);
    Bytes sum;
    for (int round = 0; round < 2; ++round) {
      const Bytes a =
          cpu.encode(round, context(MemoryKind::kHost, step, 0), g0, *cpu_stream[0]).value();
      const Bytes b =
          gpu.encode(round, context(MemoryKind::kHost, step, 1), g1, *gpu_stream[0]).value();
      sum = cpu.add(view(a), view(b)).value();
      const Bytes on_gpu = gpu.add(view(a), view(b)).value();
      EXPECT_TRUE(test_util::same_bytes(sum, on_gpu)) << "step " << step << " round " << round;
      ASSERT_TRUE(cpu.absorb(round, view(sum), *cpu_stream[0]).ok());
      ASSERT_TRUE(gpu.absorb(round, view(sum), *gpu_stream[0]).ok());
    }
    std::vector<float> on_cpu(d.elements, 0.0f), on_gpu(d.elements, 0.0f);
    ASSERT_TRUE(cpu.decode(view(sum), cpu_stream[0].get(), on_cpu).ok());
    ASSERT_TRUE(gpu.decode(view(sum), gpu_stream[0].get(), on_gpu).ok());
    EXPECT_TRUE(close(on_cpu, on_gpu, max_abs(g0) + max_abs(g1))) << "step " << step;
  }
}

TEST_F(PowersgdGpuTest, ErrorFeedbackInvariantHoldsOver100Steps) {
  for (const TensorDesc& d : {desc_of(40 * 30, 40, 30), desc_of(1000)}) {
    SCOPED_TRACE(d.elements);
    Side gpu(true, "powersgd:rank=2");
    auto streams = gpu.streams(d, 1);
    std::vector<float> residual(d.elements, 0.0f);
    for (uint64_t step = 0; step < 100; ++step) {
      const std::vector<std::vector<float>> grads{gaussian(d.elements, 1000 + step)};
      const StepResult out = run_step(gpu, streams, grads, step);
      SCOPED_TRACE("step " + std::to_string(step));
      cuda_test::expect_error_feedback(grads[0], out.decoded[0], Side::residual(*streams[0]),
                                       residual);
      if (HasFatalFailure()) return;
    }
  }
}

TEST_F(PowersgdGpuTest, FourWorkersSumLikeTheCpu) {
  constexpr size_t kWorkers = 4, kRows = 24, kCols = 20, kN = kRows * kCols;
  Pair pair("powersgd:rank=3", desc_of(kN, kRows, kCols), kWorkers);
  for (uint64_t step = 0; step < 5; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    std::vector<std::vector<float>> grads;
    std::vector<double> expected(kN, 0.0), scale(kN, 0.0);
    float max_scale = 0.0f;
    for (size_t w = 0; w < kWorkers; ++w) {
      grads.push_back(gaussian(kN, 100 * step + w));
      const auto before = Side::residual(*pair.gpu_streams[w]);
      for (size_t i = 0; i < kN; ++i) {
        expected[i] += double{grads[w][i]} + before[i];
        scale[i] += std::fabs(grads[w][i]) + std::fabs(before[i]);
        max_scale = std::max(max_scale, static_cast<float>(scale[i]));
      }
    }
    const StepResult cpu = run_step(pair.cpu, pair.cpu_streams, grads, step);
    const StepResult gpu = run_step(pair.gpu, pair.gpu_streams, grads, step);
    for (size_t w = 1; w < kWorkers; ++w) {  // identical P_hat on every GPU worker
      EXPECT_TRUE(test_util::same_bits(gpu.decoded[0], gpu.decoded[w])) << "worker " << w;
    }
    EXPECT_TRUE(close(cpu.decoded[0], gpu.decoded[0], max_scale));
    std::vector<double> got(gpu.decoded[0].begin(), gpu.decoded[0].end());
    for (size_t w = 0; w < kWorkers; ++w) {
      const auto after = Side::residual(*pair.gpu_streams[w]);
      EXPECT_TRUE(close(Side::residual(*pair.cpu_streams[w]), after, max_scale)) << "worker " << w;
      for (size_t i = 0; i < kN; ++i) got[i] += after[i];
    }
    for (size_t i = 0; i < kN; ++i) {
      ASSERT_NEAR(got[i], expected[i], 1e-5 * scale[i] + 1e-6) << "element " << i;
    }
  }
}

// Both codecs' outcome of one encode: the same error, and residuals left alike.
void expect_same_failure(Pair& pair, int round, uint64_t step, const std::vector<float>& grad) {
  const auto before = Side::residual(*pair.gpu_streams[0]);
  auto expected =
      pair.cpu.encode(round, context(MemoryKind::kHost, step), grad, *pair.cpu_streams[0]);
  auto actual =
      pair.gpu.encode(round, context(MemoryKind::kHost, step), grad, *pair.gpu_streams[0]);
  ASSERT_FALSE(expected.ok());
  ASSERT_FALSE(actual.ok());
  EXPECT_EQ(actual.status().code(), expected.status().code());
  EXPECT_EQ(actual.status().message(), expected.status().message());
  EXPECT_TRUE(test_util::same_bits(before, Side::residual(*pair.gpu_streams[0])));
}

TEST_F(PowersgdGpuTest, NonFiniteGradientsFailLikeTheCpuAndKeepTheResidual) {
  const TensorDesc d = desc_of(40 * 30, 40, 30);
  Pair pair("powersgd:rank=2", d);
  for (uint64_t step = 0; step < 3; ++step) {
    const std::vector<std::vector<float>> grads{gaussian(d.elements, 10 + step)};
    run_step(pair.cpu, pair.cpu_streams, grads, step);
    run_step(pair.gpu, pair.gpu_streams, grads, step);
  }
  auto bad = gaussian(d.elements, 20);
  bad[123] = std::numeric_limits<float>::quiet_NaN();
  expect_same_failure(pair, 0, 3, bad);
  const auto good = gaussian(d.elements, 21);
  expect_same_failure(pair, 1, 3, good);  // round 1 before round 0 was absorbed
  for (Side* side : {&pair.cpu, &pair.gpu}) {
    auto& stream = side == &pair.cpu ? *pair.cpu_streams[0] : *pair.gpu_streams[0];
    const Bytes round0 = side->encode(0, context(MemoryKind::kHost, 3), good, stream).value();
    ASSERT_TRUE(side->absorb(0, view(round0), stream).ok());
  }
  bad = good;
  bad[7] = std::numeric_limits<float>::infinity();
  expect_same_failure(pair, 1, 3, bad);
  EXPECT_TRUE(pair.gpu.encode(1, context(MemoryKind::kHost, 3), good, *pair.gpu_streams[0]).ok());

  // A product beyond the float range: 16 x 1 of 3e38 gives Q_w = 16 * 3e38 / 4 in round 1.
  const TensorDesc column = desc_of(16, 16, 1);
  Pair huge("powersgd:rank=1", column);
  const std::vector<float> big(16, 3e38f);
  for (Side* side : {&huge.cpu, &huge.gpu}) {
    auto& stream = side == &huge.cpu ? *huge.cpu_streams[0] : *huge.gpu_streams[0];
    const Bytes round0 = side->encode(0, context(MemoryKind::kHost, 0), big, stream).value();
    ASSERT_TRUE(side->absorb(0, view(round0), stream).ok());
  }
  expect_same_failure(huge, 1, 0, big);
}

// The frame `base` with a shape that does not fit the stream's 1000 elements, each checked with
// expect_alike(frame, what); with_payload(bytes) is `base` with another payload.
template <typename ExpectAlike, typename WithPayload>
void expect_bad_shapes_alike(const FrameView& base, ExpectAlike&& expect_alike,
                             WithPayload&& with_payload) {
  for (const auto& [rows, cols] : std::vector<std::pair<uint32_t, uint32_t>>{
           {31, 32}, {33, 32}, {0, 32}, {32, 0}, {1000, 1}, {0xFFFFFFFFu, 0xFFFFFFFFu}}) {
    Bytes payload(base.payload.begin(), base.payload.end());
    std::memcpy(payload.data(), &rows, 4);
    std::memcpy(payload.data() + 4, &cols, 4);
    expect_alike(with_payload(payload), "shape");
  }
  {
    Bytes narrow(8 + 4 * 1 * 4);  // 1000 x 1: the rank exceeds the smaller side
    const uint32_t shape[2] = {1000, 1};
    std::memcpy(narrow.data(), shape, sizeof shape);
    expect_alike(with_payload(narrow), "rank above the shape");
    Bytes other(8 + 4 * 40 * 4);  // 25 x 40: well formed, another stream's shape
    const uint32_t other_shape[2] = {25, 40};
    std::memcpy(other.data(), other_shape, sizeof other_shape);
    expect_alike(with_payload(other), "another stream's shape");
  }
}

TEST_F(PowersgdGpuTest, MalformedFramesFailLikeTheCpu) {
  const TensorDesc d = desc_of(1000);
  Pair pair("powersgd:rank=4", d);
  const std::vector<std::vector<float>> grads{gaussian(1000, 1)};
  const StepResult cpu = run_step(pair.cpu, pair.cpu_streams, grads, 0);
  run_step(pair.gpu, pair.gpu_streams, grads, 0);
  const Bytes& good = cpu.sums[1];
  const FrameView base = view(good);
  const std::vector<float> sentinel(1000, 7.0f);

  auto expect_alike = [&](const FrameView& f, const char* what) {
    SCOPED_TRACE(what);
    for (bool overwrite : {false, true}) {
      std::vector<float> expected = sentinel, actual = sentinel;
      const Status want = pair.cpu.decode(f, pair.cpu_streams[0].get(), expected, overwrite);
      const Status got = pair.gpu.decode(f, pair.gpu_streams[0].get(), actual, overwrite);
      ASSERT_FALSE(want.ok());
      EXPECT_EQ(got.code(), want.code());
      EXPECT_EQ(got.message(), want.message());
      EXPECT_EQ(actual, sentinel);
    }
  };
  auto with_payload = [&](const Bytes& payload) {  // a view of `payload`, which it must outlive
    FrameView f = base;
    f.payload = payload;
    return f;
  };

  FrameView f = base;
  f.payload = base.payload.first(base.payload.size() - 4);
  expect_alike(f, "short payload");
  f.payload = base.payload.first(5);
  expect_alike(f, "payload shorter than the shape");
  for (uint32_t param : {0u, 65u}) {
    f = base;
    f.header.param = param;
    expect_alike(f, "rank out of range");
  }
  f = base;
  f.header.flags = 1;
  expect_alike(f, "flags");
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    Bytes payload(base.payload.begin(), base.payload.end());
    std::memcpy(payload.data() + 8 + 4 * 17, &bad, 4);
    expect_alike(with_payload(payload), "bad value");
  }
  expect_bad_shapes_alike(base, expect_alike, with_payload);
  expect_alike(view(cpu.sums[0]), "a round-0 frame");
  {
    std::vector<float> acc = sentinel;
    EXPECT_EQ(pair.gpu.decode(base, nullptr, acc).code(), ErrorCode::kInvalidArgument);
  }
  // absorb and add_frames check too.
  f = base;
  f.header.param = 0;
  EXPECT_EQ(pair.gpu.absorb(1, f, *pair.gpu_streams[0]).code(),
            pair.cpu.absorb(1, f, *pair.cpu_streams[0]).code());
  EXPECT_EQ(pair.gpu.add(base, f).status().code(), ErrorCode::kIncompatible);
  FrameView g = base;
  g.payload = g.payload.first(g.payload.size() - 4);
  EXPECT_EQ(pair.gpu.add(g, g).status().code(), ErrorCode::kMalformedFrame);
  // The next step's round 0 leaves the old round-1 frame without its P_hat.
  const std::vector<float> next = gaussian(1000, 2);
  ASSERT_TRUE(pair.cpu.encode(0, context(MemoryKind::kHost, 1), next, *pair.cpu_streams[0]).ok());
  ASSERT_TRUE(pair.gpu.encode(0, context(MemoryKind::kHost, 1), next, *pair.gpu_streams[0]).ok());
  expect_alike(base, "stale P_hat");
}

}  // namespace
}  // namespace gradgate::kernels
