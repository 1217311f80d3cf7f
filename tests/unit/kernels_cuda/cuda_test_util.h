// Helpers shared by the CUDA codec tests: fixtures that skip without a CUDA device, device copies
// of host arrays and frames, a CPU and a CUDA codec of one spec side by side, frames encoded,
// decoded and added on either side, and the error-feedback invariant. Every test of this folder
// compares the CUDA codecs with the CPU codecs the same way, so one copy of each helper serves
// them all.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "codec_data.h"
#include "codec_test_util.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/cuda/device_stream.h"
#include "gradgate/kernels/frame.h"
#include "gradgate/kernels/make_codec_for.h"

namespace gradgate::kernels::cuda_test {

using test_util::Bytes;

inline bool gpu_available() {
  int devices = 0;
  const bool ok = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  cudaGetLastError();
  return ok;
}

/// A fixture that skips its tests without a usable CUDA device.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  }
};

/// GpuTest for parameterized tests.
template <typename Param>
class GpuParamTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  }
};

/// The parameters of the sparse codecs' tests: a tensor size and a density, named `n_density`.
using SizeAndDensity = std::tuple<size_t, double>;

/// Sizes from 1 to 2^20 + 3, each with densities 0.1, 0.01 and 0.001.
inline auto sizes_and_densities() {
  return ::testing::Combine(
      ::testing::Values(size_t{1}, size_t{7}, size_t{1000}, (size_t{1} << 20) + 3),
      ::testing::Values(0.1, 0.01, 0.001));
}

inline std::string size_and_density_name(const ::testing::TestParamInfo<SizeAndDensity>& test) {
  return std::to_string(std::get<0>(test.param)) + "_" +
         test_util::spec_test_name(std::to_string(std::get<1>(test.param)));
}

/// Device memory of `n` values, or a copy of host values; freed with it.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : size_(n) {
    EXPECT_EQ(cudaMalloc(&data_, std::max<size_t>(n, 1) * sizeof(T)), cudaSuccess);
  }
  explicit DeviceArray(std::span<const T> host) : DeviceArray(host.size()) {
    EXPECT_EQ(cudaMemcpy(data_, host.data(), host.size_bytes(), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  std::vector<T> download(size_t count) const {
    std::vector<T> host(count);
    EXPECT_EQ(cudaMemcpy(host.data(), data_, count * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return host;
  }
  std::vector<T> download() const { return download(size_); }
  std::span<T> span() { return {static_cast<T*>(data_), size_}; }

 private:
  void* data_ = nullptr;
  size_t size_;
};

inline StepContext context(MemoryKind memory, uint64_t step, uint32_t worker = 0,
                           float scale = 0.0f) {
  StepContext ctx;
  ctx.step = step;
  ctx.policy_version = 2;
  ctx.worker = worker;
  ctx.job_seed = 0x5EEDull;
  ctx.agreed_scale = scale;
  ctx.memory = memory;
  return ctx;
}

/// A CPU codec and the CUDA codec of one spec, each with its stream of one tensor of `n` values.
struct CodecPair {
  std::unique_ptr<Codec> cpu, gpu;
  std::unique_ptr<Stream> cpu_stream, gpu_stream;

  CodecPair(const std::string& spec, size_t n) {
    const CodecParams params = parse_codec_spec(spec).value();
    cpu = make_codec_for(params, MemoryKind::kHost).value();
    auto made = make_codec_for(params, MemoryKind::kDevice);
    EXPECT_TRUE(made.ok()) << made.status().to_string();
    gpu = std::move(made).value();
    const TensorDesc desc = test_util::matrix_desc(1, n, 3, 7);
    cpu_stream = cpu->make_stream(desc).value();
    gpu_stream = gpu->make_stream(desc).value();
  }

  Result<Bytes> encode_cpu(std::span<const float> grad, const StepContext& ctx) {
    return test_util::encode_frame(*cpu, 0, ctx, grad, *cpu_stream);
  }
  Result<Bytes> encode_gpu(std::span<const float> grad, StepContext ctx) {
    ctx.memory = MemoryKind::kDevice;
    DeviceArray<float> device_grad(grad);
    DeviceArray<std::byte> out(gpu->max_frame_bytes(gpu_stream->desc()));
    auto size = gpu->encode(0, ctx, device_grad.span(), *gpu_stream, out.span());
    if (!size.ok()) return size.status();
    return out.download(*size);
  }
  std::vector<float> gpu_residual() { return cuda::residual_on_host(*gpu_stream).value(); }
  /// One step of `grad` on both codecs (ctx.memory is set for each): the same frame byte for
  /// byte, the same residual bit for bit. Call it in ASSERT_NO_FATAL_FAILURE.
  void expect_same_step(std::span<const float> grad, const StepContext& ctx) {
    auto cpu_frame = encode_cpu(grad, ctx);
    auto gpu_frame = encode_gpu(grad, ctx);
    ASSERT_TRUE(cpu_frame.ok()) << cpu_frame.status().to_string();
    ASSERT_TRUE(gpu_frame.ok()) << gpu_frame.status().to_string();
    ASSERT_TRUE(test_util::same_bytes(*cpu_frame, *gpu_frame)) << "step " << ctx.step;
    ASSERT_TRUE(test_util::same_bits(cpu_stream->residual(), gpu_residual()))
        << "step " << ctx.step;
  }
  int gpu_passes() const {
    return static_cast<const cuda::DeviceStream&>(*gpu_stream).last_encode_passes();
  }
};

/// A frame on the device with its view: the header on the host, the payload on the device.
struct DeviceFrame {
  DeviceArray<std::byte> bytes;
  FrameView view;

  /// A whole frame copied to the device, its host copy parsed (and its checksum verified).
  explicit DeviceFrame(const Bytes& frame) : bytes(std::span<const std::byte>(frame)) {
    view = parse_frame(frame).value();
    view.payload = bytes.span().subspan(kFrameHeaderBytes);
  }
  /// The payload of `host` copied to the device, its header kept as it is (unchecked).
  explicit DeviceFrame(const FrameView& host) : bytes(host.payload), view(host) {
    view.payload = bytes.span();
  }
};

/// `frame` decoded on the device into a copy of `acc` (decode when `overwrite`, else
/// decode_accumulate).
inline Result<std::vector<float>> decode_on_gpu(const Codec& codec, const Bytes& frame,
                                                std::span<const float> acc, bool overwrite) {
  DeviceFrame device(frame);
  DeviceArray<float> out(acc);
  const Status status = overwrite ? codec.decode(device.view, nullptr, out.span())
                                  : codec.decode_accumulate(device.view, nullptr, out.span());
  if (!status.ok()) return status;
  return out.download();
}

/// `frame` decoded on the host into `acc`, as decode_on_gpu.
inline Result<std::vector<float>> decode_on_cpu(const Codec& codec, const Bytes& frame,
                                                std::vector<float> acc, bool overwrite) {
  auto view = parse_frame(frame);
  if (!view.ok()) return view.status();
  const Status status =
      overwrite ? codec.decode(*view, nullptr, acc) : codec.decode_accumulate(*view, nullptr, acc);
  if (!status.ok()) return status;
  return acc;
}

/// The sum of frames `a` and `b`, added on the device.
inline Result<Bytes> add_on_gpu(const Codec& codec, const Bytes& a, const Bytes& b) {
  DeviceFrame da(a), db(b);
  DeviceArray<std::byte> out(std::max(a.size(), b.size()));
  auto size = codec.add_frames(da.view, db.view, out.span());
  if (!size.ok()) return size.status();
  return out.download(*size);
}

/// Checks the error-feedback invariant of one step: grad + residual before == decoded + `after`
/// (the residual after the step), to float rounding. Then sets `residual` to `after`.
inline void expect_error_feedback(std::span<const float> grad, std::span<const float> decoded,
                                  const std::vector<float>& after, std::vector<float>& residual) {
  for (size_t i = 0; i < grad.size(); ++i) {
    const double before = static_cast<double>(grad[i]) + residual[i];
    const double now = static_cast<double>(decoded[i]) + after[i];
    const double magnitude = std::fabs(before) + std::fabs(decoded[i]) + std::fabs(after[i]);
    ASSERT_NEAR(before, now, 1e-6 * (1.0 + magnitude)) << "element " << i;
  }
  residual = after;
}

/// The same for one step of `codecs`' GPU side on `grad` that wrote `frame`, decoded on the CPU.
inline void expect_error_feedback(CodecPair& codecs, std::span<const float> grad,
                                  const Bytes& frame, std::vector<float>& residual) {
  const size_t n = grad.size();
  auto decoded = decode_on_cpu(*codecs.cpu, frame, std::vector<float>(n, 0.0f), true);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  const auto after = codecs.gpu_residual();
  ASSERT_EQ(after.size(), n);
  expect_error_feedback(grad, *decoded, after, residual);
}

}  // namespace gradgate::kernels::cuda_test
