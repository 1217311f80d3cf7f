#include "gateway/core/tensor_codecs.h"

#include <spdlog/spdlog.h>

#include "gradgate/kernels/codec_spec.h"

namespace gradgate::gateway {
namespace {

// A single local worker's fp32 buffer needs no node sum: the all-reduce reads and writes it.
bool reduces_in_place(uint32_t local_workers, Dtype dtype) {
  return local_workers == 1 && dtype == Dtype::kFp32;
}

}  // namespace

Status TensorCodecs::check_configured() const {
  auto codec = place_codec(settings_.codec, false, settings_.collective, job_.nodes, 0);
  if (codec.ok()) return {};
  return Status(codec.status().code(), "compression.codec: " + codec.status().message());
}

std::string TensorCodecs::configured(const TensorSpec& tensor) const {
  return for_tensor(tensor,
                    tensor.elements < settings_.min_compress_elements ? "none" : settings_.codec);
}

// A node sum or a sum of frames beyond fp16's range skips the step, as it would be infinite in
// DDP's fp16 all-reduce (element_rules.h: half_sendable).
std::string TensorCodecs::for_tensor(const TensorSpec& tensor, const std::string& spec) const {
  if (tensor.dtype == Dtype::kFp32) return spec;
  const auto params = kernels::parse_codec_spec(spec);
  if (!params.ok() || params->id != CodecId::kNone) return spec;
  return kernels::format_codec_spec(kernels::sent_in_precision(
      *params, tensor.dtype == Dtype::kFp16 ? CodecId::kFp16 : CodecId::kBf16));
}

Result<Placement> TensorCodecs::place(const std::string& spec, const TensorSpec& tensor,
                                      DeviceTensor* device) {
  PlacementProber prober;
  if (device != nullptr) {
    prober = [&](const kernels::Codec& gpu, const kernels::Codec& cpu) {
      return probe(gpu, cpu, tensor, *device);
    };
  }
  auto placed = place_codec(spec, device != nullptr, settings_.collective, job_.nodes,
                            tensor.elements, settings_.placement, prober);
  if (placed.ok() && !placed->probe_error.empty()) {
    spdlog::warn(
        "tensor \"{}\": the placement probe of codec {} failed, the codec runs on the "
        "GPU: {}",
        tensor.name, spec, placed->probe_error);
  }
  if (placed.ok() && device != nullptr && !placed->on_gpu) {
    spdlog::info("tensor \"{}\" in GPU memory: codec {} runs on the CPU: {}", tensor.name, spec,
                 placed->cpu_reason);
  }
  return placed;
}

Result<PlacementProbe> TensorCodecs::probe(const kernels::Codec& gpu, const kernels::Codec& cpu,
                                           const TensorSpec& tensor, DeviceTensor& device) {
  kernels::TensorDesc desc;
  desc.job_id = static_cast<uint32_t>(job_.id);
  desc.elements = tensor.elements;
  desc.rows = tensor.rows;
  desc.cols = tensor.cols;
  const ProbeKey key{gpu.spec(), device.device(), probe_sample(desc).elements};
  if (auto known = probes_.find(key); known != probes_.end()) return known->second.probe;
  auto measured = probe_placement(gpu, cpu, device.queue(), desc);
  if (!measured.ok()) return measured.status();
  spdlog::info(
      "placement probe of codec {} on GPU {} ({} values): {:.3g} elements/s on the GPU, "
      "{:.3g} on the CPU",
      gpu.spec(), device.device(), std::get<2>(key), measured->gpu_elements_per_second,
      measured->cpu_elements_per_second);
  probes_.emplace(
      key, PlacementRecord{codec_name(gpu.id()), device.device(), std::get<2>(key), *measured});
  return measured;
}

Result<Algorithm> TensorCodecs::algorithm(const kernels::Codec& codec,
                                          const TensorSpec& tensor) const {
  return choose_algorithm(codec, settings_.collective, job_.nodes, tensor.elements);
}

Result<TensorStreams> TensorCodecs::make_streams(const TensorSpec& spec, uint32_t id,
                                                 const kernels::Codec& codec, size_t in_use) const {
  auto algorithm = this->algorithm(codec, spec);
  if (!algorithm.ok()) {
    return Status(algorithm.status().code(),
                  "tensor \"" + spec.name + "\": " + algorithm.status().message());
  }
  kernels::TensorDesc desc;
  desc.job_id = static_cast<uint32_t>(job_.id);
  desc.tensor_id = id;
  desc.elements = spec.elements;
  desc.rows = spec.rows;
  desc.cols = spec.cols;
  auto streams = make_tensor_streams(codec, desc, *algorithm, job_.nodes, job_.node_rank,
                                     settings_.segment_bytes / sizeof(float));
  if (!streams.ok()) {
    return Status(streams.status().code(),
                  "tensor \"" + spec.name + "\": " + streams.status().message());
  }
  GRADGATE_RETURN_IF_ERROR(check_cap(spec.name, streams->memory_bytes(), in_use));
  return streams;
}

Status TensorCodecs::check_cap(const std::string& tensor, size_t wanted, size_t in_use) const {
  if (in_use + wanted <= settings_.memory_cap_bytes) return {};
  return Status(ErrorCode::kResourceExhausted,
                "tensor \"" + tensor + "\" needs " + std::to_string(wanted) +
                    " bytes of stream state; with the " + std::to_string(in_use) +
                    " bytes in use that passes streams.residual_memory_cap_bytes (" +
                    std::to_string(settings_.memory_cap_bytes) + ")");
}

size_t TensorCodecs::host_node_sum_bytes(const TensorSpec& spec, bool gpu_buffers,
                                         bool on_gpu) const {
  const bool host_sum = gpu_buffers ? !on_gpu : !reduces_in_place(job_.local_workers, spec.dtype);
  return host_sum ? spec.elements * sizeof(float) : 0;
}

std::vector<PlacementRecord> TensorCodecs::probes() const {
  std::vector<PlacementRecord> records;
  for (const auto& [key, record] : probes_) records.push_back(record);
  return records;
}

}  // namespace gradgate::gateway
