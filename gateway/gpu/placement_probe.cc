#include "gateway/gpu/placement_probe.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <random>
#include <span>
#include <vector>

#include "gradgate/kernels/frame.h"

namespace gradgate::gateway {
namespace {

using kernels::DeviceMemory;
using kernels::FrameView;

/// How a frame of `bytes` bytes, just encoded, reaches the decoder: the view it reads.
using Stage = std::function<Result<FrameView>(size_t bytes)>;

/// One step of `codec` as the all-gather runs it: each round encoded into `frame` and staged, every
/// round but the last absorbed into the stream, the last one decoded into `out`.
Status run_step(const kernels::Codec& codec, const kernels::StepContext& ctx,
                std::span<const float> values, kernels::Stream& stream, std::span<std::byte> frame,
                std::span<float> out, const Stage& stage) {
  for (int round = 0; round < codec.rounds(); ++round) {
    auto size = codec.encode(round, ctx, values, stream, frame);
    if (!size.ok()) return size.status();
    auto view = stage(*size);
    if (!view.ok()) return view.status();
    if (round + 1 == codec.rounds()) return codec.decode(*view, &stream, out);
    GRADGATE_RETURN_IF_ERROR(codec.absorb(round, *view, stream));
  }
  return {};
}

/// The seconds of `step(1)`, after `step(0)` warmed up allocations and caches.
Result<double> timed_second_step(const std::function<Status(uint64_t step)>& step) {
  GRADGATE_RETURN_IF_ERROR(step(0));
  const auto start = std::chrono::steady_clock::now();
  GRADGATE_RETURN_IF_ERROR(step(1));
  return std::max(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                  1e-9);
}

/// The view of a frame of `bytes` bytes at `frame` whose header is readable at `header_bytes`.
Result<FrameView> frame_view(std::span<const std::byte> header_bytes, const std::byte* frame,
                             size_t bytes) {
  auto header = kernels::peek_frame_header(header_bytes.first(bytes));
  if (!header.ok()) return header.status();
  return FrameView{*header,
                   std::span<const std::byte>(frame, bytes).subspan(kernels::kFrameHeaderBytes)};
}

/// On the CPU: the node sum down to host memory, a step there, the result back up.
Result<double> time_on_cpu(const kernels::Codec& codec, kernels::DeviceQueue& queue,
                           const kernels::TensorDesc& sample, const float* values, float* out) {
  const size_t bytes = sample.elements * sizeof(float);
  std::vector<float> host_values(sample.elements), host_out(sample.elements);
  std::vector<std::byte> frame(codec.max_frame_bytes(sample));
  auto stream = codec.make_stream(sample);
  if (!stream.ok()) return stream.status();
  const Stage stage = [&](size_t size) { return frame_view(frame, frame.data(), size); };
  return timed_second_step([&](uint64_t step) -> Status {
    GRADGATE_RETURN_IF_ERROR(queue.copy_to_host(host_values.data(), values, bytes));
    GRADGATE_RETURN_IF_ERROR(queue.synchronize());
    kernels::StepContext ctx;
    ctx.step = step;
    GRADGATE_RETURN_IF_ERROR(run_step(codec, ctx, host_values, **stream, frame, host_out, stage));
    GRADGATE_RETURN_IF_ERROR(queue.copy_to_device(out, host_out.data(), bytes));
    return queue.synchronize();
  });
}

/// On the GPU: a step there, each frame staged through page-locked host memory and back as the
/// collective stages it.
Result<double> time_on_gpu(const kernels::Codec& codec, kernels::DeviceQueue& queue,
                           const kernels::TensorDesc& sample, const float* values, float* out) {
  GRADGATE_RETURN_IF_ERROR(queue.make_current());
  const size_t max_bytes = codec.max_frame_bytes(sample);
  auto encoded = DeviceMemory::allocate(queue.device(), max_bytes);
  if (!encoded.ok()) return encoded.status();
  auto decoded = DeviceMemory::allocate(queue.device(), max_bytes);
  if (!decoded.ok()) return decoded.status();
  auto staged = DeviceMemory::allocate_pinned_host(queue.device(), max_bytes);
  if (!staged.ok()) return staged.status();
  auto stream = codec.make_stream(sample);
  if (!stream.ok()) return stream.status();
  const Stage stage = [&](size_t size) -> Result<FrameView> {
    GRADGATE_RETURN_IF_ERROR(queue.copy_to_host((*staged)->data(), (*encoded)->data(), size));
    GRADGATE_RETURN_IF_ERROR(queue.synchronize());
    GRADGATE_RETURN_IF_ERROR(queue.copy_to_device((*decoded)->data(), (*staged)->data(), size));
    GRADGATE_RETURN_IF_ERROR(queue.synchronize());
    return frame_view({(*staged)->data(), size}, (*decoded)->data(), size);
  };
  return timed_second_step([&](uint64_t step) -> Status {
    kernels::StepContext ctx;
    ctx.step = step;
    ctx.memory = kernels::MemoryKind::kDevice;
    ctx.cuda_stream = queue.cuda_stream();
    GRADGATE_RETURN_IF_ERROR(run_step(codec, ctx, {values, sample.elements}, **stream,
                                      {(*encoded)->data(), max_bytes}, {out, sample.elements},
                                      stage));
    return queue.synchronize();
  });
}

}  // namespace

kernels::TensorDesc probe_sample(const kernels::TensorDesc& desc) {
  kernels::TensorDesc sample = desc;
  if (desc.rows > 0 && desc.cols > 0) {
    sample.rows = std::clamp<size_t>(kProbeElements / desc.cols, 1, desc.rows);
    sample.elements = sample.rows * sample.cols;
  } else {
    sample.elements = std::min(desc.elements, kProbeElements);
    sample.rows = sample.cols = 0;
  }
  return sample;
}

Result<PlacementProbe> probe_placement(const kernels::Codec& gpu_codec,
                                       const kernels::Codec& cpu_codec, kernels::DeviceQueue& queue,
                                       const kernels::TensorDesc& desc) {
  const kernels::TensorDesc sample = probe_sample(desc);
  const size_t bytes = sample.elements * sizeof(float);
  std::vector<float> gradient(sample.elements);
  std::mt19937 random(17);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& value : gradient) value = normal(random);
  auto values = DeviceMemory::allocate(queue.device(), bytes);
  if (!values.ok()) return values.status();
  auto out = DeviceMemory::allocate(queue.device(), bytes);
  if (!out.ok()) return out.status();
  GRADGATE_RETURN_IF_ERROR(queue.copy_to_device((*values)->data(), gradient.data(), bytes));
  GRADGATE_RETURN_IF_ERROR(queue.synchronize());
  const auto* in = reinterpret_cast<const float*>((*values)->data());
  auto* result = reinterpret_cast<float*>((*out)->data());
  auto gpu_seconds = time_on_gpu(gpu_codec, queue, sample, in, result);
  if (!gpu_seconds.ok()) return gpu_seconds.status();
  auto cpu_seconds = time_on_cpu(cpu_codec, queue, sample, in, result);
  if (!cpu_seconds.ok()) return cpu_seconds.status();
  const auto elements = static_cast<double>(sample.elements);
  return PlacementProbe{elements / *gpu_seconds, elements / *cpu_seconds};
}

}  // namespace gradgate::gateway
