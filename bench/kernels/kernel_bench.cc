// gradgate_kernel_bench: the speed of the CUDA codecs on one GPU, as one JSON object per line (see
// bench_options.h for the command line). For each codec spec and size: encode and
// decode_accumulate GB/s (gradient bytes per second, the median of CUDA-event timings after warm-up
// steps), the same run's device-to-device copy bandwidth of the size (bytes read + written, taken
// once per size), the fraction of it that the encode reaches on its least traffic
// (encode_traffic.h), the encode's passes over memory, the wire ratio; for topk also the achieved k
// over the target k, the speed of the selection alone (ef=0) split into its phases (topk_phases.h),
// and of CUB's radix-sort top-k on the same tensor. A codec without a CUDA implementation gets one
// "error" line. Exit status: 0, 1 when a measurement failed, 2 when nothing could run (bad options,
// no device).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bench_options.h"
#include "cuda_check.h"
#include "device_gaussian.h"
#include "device_memory.h"
#include "encode_traffic.h"
#include "gpu_timer.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/cuda/device_stream.h"
#include "gradgate/kernels/cuda_codecs.h"
#include "gradgate/kernels/frame.h"
#include "json_line.h"
#include "radix_topk.h"
#include "topk_phases.h"

namespace gradgate::bench {
namespace {

using kernels::Codec;
using kernels::CodecParams;
using kernels::FrameView;
using kernels::cuda::device_alloc;
using kernels::cuda::DevicePtr;

constexpr uint64_t kSeed = 42;

double gbps(double bytes, double ms) { return bytes / (ms * 1e6); }

// What the rows of one run share.
struct Run {
  KernelBenchOptions options;
  std::string device;
  std::string dist;             // "gaussian" or "file"
  std::vector<float> input;     // --input's values; empty for the gaussian
  cudaStream_t cuda = nullptr;  // encodes, copies and references run here
};

// The row's first fields: which codec (name, then the spec's parameters) on which data.
JsonLine row_start(const Run& run, const CodecParams& params, std::optional<size_t> n) {
  const std::string spec = kernels::format_codec_spec(params);
  const size_t colon = spec.find(':');
  JsonLine line;
  line.text("codec", codec_name(params.id))
      .text("param", colon == std::string::npos ? "" : spec.substr(colon + 1))
      .text("dist", run.dist);
  if (n) line.count("n", *n);
  line.text("device", run.device);
  return line;
}

void print(const JsonLine& line) { std::cout << line.str() << std::endl; }

Result<std::string> device_name() {
  int device = 0;
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  cudaDeviceProp properties{};
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&properties, device));
  return std::string(properties.name);
}

Result<std::vector<float>> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const auto bytes = static_cast<size_t>(std::max<std::streamoff>(in.tellg(), 0));
  std::vector<float> values(bytes / sizeof(float));
  in.seekg(0);
  if (!in || values.empty() ||
      !in.read(reinterpret_cast<char*>(values.data()),
               static_cast<std::streamsize>(values.size() * sizeof(float)))) {
    return Status(ErrorCode::kInvalidArgument, "cannot read float32 values from '" + path + "'");
  }
  return values;
}

// The gradient of `n` elements: the gaussian, or --input's values tiled.
Status make_gradient(const Run& run, float* grad, size_t n) {
  if (run.input.empty()) {
    GRADGATE_RETURN_IF_ERROR(fill_gaussian(grad, n, kSeed, run.cuda));
    GRADGATE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(run.cuda));
    return {};
  }
  for (size_t at = 0; at < n; at += run.input.size()) {
    GRADGATE_CUDA_RETURN_IF_ERROR(cudaMemcpy(grad + at, run.input.data(),
                                             std::min(run.input.size(), n - at) * sizeof(float),
                                             cudaMemcpyHostToDevice));
  }
  return {};
}

Status dump(const float* grad, size_t n, const std::string& path) {
  std::vector<float> host(n);
  GRADGATE_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(host.data(), grad, n * sizeof(float), cudaMemcpyDeviceToHost));
  std::ofstream out(path, std::ios::binary);
  if (!out.write(reinterpret_cast<const char*>(host.data()),
                 static_cast<std::streamsize>(n * sizeof(float)))) {
    return Status(ErrorCode::kInvalidArgument, "cannot write '" + path + "'");
  }
  return {};
}

// A frame of `size` bytes in device memory: its header read back to the host, its payload left
// on the device (what the CUDA codecs decode).
Result<FrameView> device_frame(const std::byte* frame, size_t size) {
  std::array<std::byte, kernels::kFrameHeaderBytes> header;
  GRADGATE_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(header.data(), frame, header.size(), cudaMemcpyDeviceToHost));
  auto parsed = kernels::peek_frame_header(header);  // our own frame: no checksum to verify
  if (!parsed.ok()) return parsed.status();
  return FrameView{*parsed, {frame + header.size(), size - header.size()}};
}

// One codec, its stream of one tensor and room for its frames, in device memory.
struct Encoder {
  std::unique_ptr<Codec> codec;
  std::unique_ptr<kernels::Stream> stream;
  DevicePtr<std::byte> frame;
  kernels::StepContext ctx;
  size_t frame_bytes = 0;  // of the last step

  static Result<Encoder> make(const CodecParams& params, size_t n, cudaStream_t cuda) {
    Encoder encoder;
    auto codec = kernels::make_cuda_codec(params);
    if (!codec.ok()) return codec.status();
    encoder.codec = std::move(codec).value();
    kernels::TensorDesc desc;
    desc.elements = n;
    auto stream = encoder.codec->make_stream(desc);
    if (!stream.ok()) return stream.status();
    encoder.stream = std::move(stream).value();
    auto frame = device_alloc<std::byte>(encoder.codec->max_frame_bytes(desc));
    if (!frame.ok()) return frame.status();
    encoder.frame = std::move(frame).value();
    encoder.ctx.job_seed = kSeed;
    encoder.ctx.memory = kernels::MemoryKind::kDevice;
    encoder.ctx.cuda_stream = cuda;
    return encoder;
  }

  std::span<std::byte> frame_span() const {
    return {frame.get(), codec->max_frame_bytes(stream->desc())};
  }

  // One step of a single worker: every round (a multi-round codec absorbing its own frame), with
  // the scale the codec finds itself.
  Status step(const float* grad) {
    ++ctx.step;
    const std::span<const float> g(grad, stream->desc().elements);
    for (int round = 0; round < codec->rounds(); ++round) {
      auto size = codec->encode(round, ctx, g, *stream, frame_span());
      if (!size.ok()) return size.status();
      frame_bytes = *size;
      if (codec->rounds() > 1) {
        auto view = device_frame(frame.get(), frame_bytes);
        if (!view.ok()) return view.status();
        GRADGATE_RETURN_IF_ERROR(codec->absorb(round, *view, *stream));
      }
    }
    return {};
  }

  Result<double> time_steps(const Run& run, const float* grad) {
    return median_ms(run.cuda, run.options.warmup, run.options.reps, [&] { return step(grad); });
  }
};

// The select-only encoder's time split into its phases (topk_phases.h), as shares of its encode,
// and its streaming pass (4 bytes read per element) against the copy bandwidth. A phase that
// cannot be timed leaves its reason in "phases_error" and the row's other figures stand.
void add_topk_phases(const Run& run, const CodecParams& params, Encoder& select, const float* grad,
                     size_t n, double select_ms, double copy_gbps, JsonLine& line) {
  auto phases = time_topk_phases(params, grad, n, *select.stream, run.cuda, 1, run.options.reps);
  if (!phases.ok()) {
    line.text("phases_error", phases.status().to_string());
    return;
  }
  line.number("pass_roofline",
              gbps(static_cast<double>(n * sizeof(float)), phases->pass_ms) / copy_gbps)
      .number("share_pass", phases->pass_ms / select_ms)
      .number("share_compact", (phases->collect_ms - phases->pass_ms) / select_ms)
      .number("share_choose", (phases->selection_ms - phases->collect_ms) / select_ms)
      .number("share_frame", (select_ms - phases->selection_ms) / select_ms);
}

// topk's extra fields: the achieved k, the selection alone with its phases, and the CUB reference.
Status measure_topk(const Run& run, const CodecParams& params, const Encoder& encoder,
                    const float* grad, size_t n, double copy_gbps, JsonLine& line) {
  uint32_t count = 0;  // the payload starts with the count of values sent
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaMemcpy(&count, encoder.frame.get() + kernels::kFrameHeaderBytes,
                                           sizeof count, cudaMemcpyDeviceToHost));
  const double k = std::max(1.0, std::round(params.density * static_cast<double>(n)));
  CodecParams select_params = params;
  select_params.error_feedback = false;
  JsonLine phases;
  auto select_ms = [&]() -> Result<double> {  // frees its encoder before the reference allocates
    auto select = Encoder::make(select_params, n, run.cuda);
    if (!select.ok()) return select.status();
    auto ms = select->time_steps(run, grad);
    if (ms.ok()) add_topk_phases(run, select_params, *select, grad, n, *ms, copy_gbps, phases);
    return ms;
  }();
  if (!select_ms.ok()) return select_ms.status();
  auto reference = RadixTopk::make(n);
  if (!reference.ok()) return reference.status();
  auto sort_ms = median_ms(run.cuda, 1, std::max(run.options.reps / 2, 3),
                           [&] { return (*reference)->run(grad, run.cuda); });
  if (!sort_ms.ok()) return sort_ms.status();
  const double bytes = static_cast<double>(n * sizeof(float));
  line.number("k_ratio", count / k)
      .number("select_only_gbps", gbps(bytes, *select_ms))
      .append(phases)
      .number("cub_topk_gbps", gbps(bytes, *sort_ms))
      .number("select_vs_cub", *sort_ms / *select_ms);
  return {};
}

// The device-to-device copy bandwidth of `n` floats (bytes read plus written), the rooflines'
// reference: taken once per size, before any codec runs, so that every row of a size is measured
// against the same copy (timed per row, it read 2.57 to 2.99 TB/s on an H100 within one run).
Result<double> copy_gbps_of(const Run& run, const float* grad, float* acc, size_t n) {
  auto copy_ms = median_ms(run.cuda, 2, 3 * run.options.reps, [&]() -> Status {
    GRADGATE_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(acc, grad, n * sizeof(float), cudaMemcpyDeviceToDevice, run.cuda));
    return {};
  });
  if (!copy_ms.ok()) return copy_ms.status();
  return gbps(2.0 * static_cast<double>(n * sizeof(float)), *copy_ms);
}

// One row: `params` on the gradient of `n` elements at `grad`, with `acc` as scratch, against the
// size's copy bandwidth.
Status measure(const Run& run, const CodecParams& params, const float* grad, float* acc, size_t n,
               double copy_gbps) {
  const double bytes = static_cast<double>(n * sizeof(float));
  auto encoder = Encoder::make(params, n, run.cuda);
  if (!encoder.ok()) return encoder.status();
  auto encode_ms = encoder->time_steps(run, grad);
  if (!encode_ms.ok()) return encode_ms.status();
  const auto* device_stream =
      dynamic_cast<const kernels::cuda::DeviceStream*>(encoder->stream.get());
  const int passes = device_stream ? device_stream->last_encode_passes() : 0;
  auto frame = device_frame(encoder->frame.get(), encoder->frame_bytes);
  if (!frame.ok()) return frame.status();
  auto decode_ms = median_ms(cudaStreamPerThread, 1, run.options.reps, [&] {
    return encoder->codec->decode_accumulate(*frame, encoder->stream.get(), {acc, n});
  });
  if (!decode_ms.ok()) return decode_ms.status();

  const double encode_gbps = gbps(bytes, *encode_ms);
  const double traffic = least_encode_traffic(params, n, encoder->frame_bytes);
  JsonLine line = row_start(run, params, n);
  line.number("encode_gbps", encode_gbps)
      .number("decode_gbps", gbps(bytes, *decode_ms))
      .number("memcpy_gbps", copy_gbps)
      .number("traffic_bytes", traffic)
      .number("roofline", roofline_fraction(encode_gbps, traffic, copy_gbps))
      .number("wire_ratio", static_cast<double>(encoder->frame_bytes) / bytes)
      .number("passes", passes > 0 ? std::optional<double>(passes) : std::nullopt);
  if (params.id == CodecId::kTopk) {
    GRADGATE_RETURN_IF_ERROR(measure_topk(run, params, *encoder, grad, n, copy_gbps, line));
  }
  print(line);
  return {};
}

int run_bench(Run& run) {
  std::vector<CodecParams> codecs;
  int failures = 0;
  for (const auto& spec : run.options.specs) {
    auto params = kernels::parse_codec_spec(spec);
    if (!params.ok()) {
      std::cerr << params.status().to_string() << "\n";
      return 2;
    }
    auto codec = kernels::make_cuda_codec(*params);
    if (!codec.ok() && codec.status().code() == ErrorCode::kUnsupported) {
      print(row_start(run, *params, std::nullopt).text("error", codec.status().to_string()));
      continue;
    }
    codecs.push_back(*params);
  }
  const size_t largest = *std::max_element(run.options.sizes.begin(), run.options.sizes.end());
  for (size_t n : run.options.sizes) {
    auto grad = device_alloc<float>(n);
    auto acc = device_alloc<float>(n);
    Status status = grad.ok() ? acc.status() : grad.status();
    if (status.ok()) status = make_gradient(run, grad->get(), n);
    if (status.ok() && n == largest && !run.options.dump.empty()) {
      status = dump(grad->get(), n, run.options.dump);
    }
    double copy_gbps = 0.0;
    if (status.ok()) {
      const auto copy = copy_gbps_of(run, grad->get(), acc->get(), n);
      status = copy.status();
      if (copy.ok()) copy_gbps = *copy;
    }
    if (!status.ok()) {
      print(JsonLine().count("n", n).text("device", run.device).text("error", status.to_string()));
      ++failures;
      continue;
    }
    for (const auto& params : codecs) {
      const Status measured = measure(run, params, grad->get(), acc->get(), n, copy_gbps);
      if (!measured.ok()) {
        print(row_start(run, params, n).text("error", measured.to_string()));
        ++failures;
      }
    }
  }
  return failures == 0 ? 0 : 1;
}

int main_with(std::span<const std::string_view> args) {
  auto options = parse_kernel_bench_args(args);
  if (!options.ok()) {
    std::cerr << options.status().to_string() << "\n"
              << "usage: see bench/kernels/bench_options.h\n";
    return 2;
  }
  Run run;
  run.options = std::move(options).value();
  run.dist = run.options.input.empty() ? "gaussian" : "file";
  if (!run.options.input.empty()) {
    auto input = read_floats(run.options.input);
    if (!input.ok()) {
      std::cerr << input.status().to_string() << "\n";
      return 2;
    }
    run.input = std::move(input).value();
  }
  auto device = device_name();
  Status started = device.status();
  if (started.ok()) {
    const cudaError_t created = cudaStreamCreateWithFlags(&run.cuda, cudaStreamNonBlocking);
    if (created != cudaSuccess) {
      started =
          kernels::cuda::cuda_status(created, "cudaStreamCreateWithFlags", __FILE__, __LINE__);
    }
  }
  if (!started.ok()) {
    print(JsonLine().text("error", "no usable CUDA device: " + started.to_string()));
    return 2;
  }
  run.device = *device;
  const int result = run_bench(run);
  cudaStreamDestroy(run.cuda);
  return result;
}

}  // namespace
}  // namespace gradgate::bench

int main(int argc, char** argv) {
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  return gradgate::bench::main_with(args);
}
