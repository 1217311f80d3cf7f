// Helpers of the sparse codecs' GPU tests (topk, randomk): device buffers, a CPU and a CUDA codec
// of one spec side by side, and frames encoded, decoded and added on either side.
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
#include <vector>

#include "codec_test_util.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/cuda/device_stream.h"
#include "gradgate/kernels/frame.h"

namespace gradgate::kernels::sparse_test {

using test_util::Bytes;

inline bool gpu_available() {
  int devices = 0;
  const bool ok = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  cudaGetLastError();
  return ok;
}

/// A device copy of host values, freed with it.
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

inline StepContext context(MemoryKind memory, uint64_t step, uint32_t worker = 0) {
  StepContext ctx;
  ctx.step = step;
  ctx.policy_version = 2;
  ctx.worker = worker;
  ctx.job_seed = 0x5EEDull;
  ctx.memory = memory;
  return ctx;
}

/// A CPU codec and the CUDA codec of one spec, each with its stream of one tensor.
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
  int gpu_passes() const {
    return static_cast<const cuda::DeviceStream&>(*gpu_stream).last_encode_passes();
  }
};

/// A frame in device memory with its host-parsed view (header on the host, payload on the device).
struct DeviceFrame {
  DeviceArray<std::byte> bytes;
  FrameView view;

  explicit DeviceFrame(const Bytes& frame) : bytes(std::span<const std::byte>(frame)) {
    view = parse_frame(frame).value();
    view.payload = bytes.span().subspan(kFrameHeaderBytes);
  }
};

inline Result<std::vector<float>> decode_on_gpu(const Codec& codec, const Bytes& frame,
                                                std::span<const float> acc, bool overwrite) {
  DeviceFrame device(frame);
  DeviceArray<float> out(acc);
  const Status status = overwrite ? codec.decode(device.view, nullptr, out.span())
                                  : codec.decode_accumulate(device.view, nullptr, out.span());
  if (!status.ok()) return status;
  return out.download();
}

inline Result<std::vector<float>> decode_on_cpu(const Codec& codec, const Bytes& frame,
                                                std::vector<float> acc, bool overwrite) {
  auto view = parse_frame(frame);
  if (!view.ok()) return view.status();
  const Status status =
      overwrite ? codec.decode(*view, nullptr, acc) : codec.decode_accumulate(*view, nullptr, acc);
  if (!status.ok()) return status;
  return acc;
}

inline Result<Bytes> add_on_gpu(const Codec& codec, const Bytes& a, const Bytes& b) {
  DeviceFrame da(a), db(b);
  DeviceArray<std::byte> out(std::max(a.size(), b.size()));
  auto size = codec.add_frames(da.view, db.view, out.span());
  if (!size.ok()) return size.status();
  return out.download(*size);
}

/// Checks the error-feedback invariant of one step of `codecs`' GPU side on `grad`: grad +
/// residual before == decoded frame + residual after, to float rounding. Updates `residual`.
inline void expect_error_feedback(CodecPair& codecs, std::span<const float> grad,
                                  const Bytes& frame, std::vector<float>& residual) {
  const size_t n = grad.size();
  auto decoded = decode_on_cpu(*codecs.cpu, frame, std::vector<float>(n, 0.0f), true);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  const auto after = codecs.gpu_residual();
  ASSERT_EQ(after.size(), n);
  for (size_t i = 0; i < n; ++i) {
    const double before = static_cast<double>(grad[i]) + residual[i];
    const double now = static_cast<double>((*decoded)[i]) + after[i];
    const double magnitude = std::fabs(before) + std::fabs((*decoded)[i]) + std::fabs(after[i]);
    ASSERT_NEAR(before, now, 1e-6 * (1.0 + magnitude)) << "element " << i;
  }
  residual = after;
}

}  // namespace gradgate::kernels::sparse_test
