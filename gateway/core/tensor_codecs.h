// Which codec a tensor runs, where it runs it (placement.h) and its codec streams, within the
// memory cap: what declaring a tensor and following a policy both make. Keeps the placement
// probes it made, one per codec, GPU and sample size. Not thread-safe: the step runner guards it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "gateway/collective/tensor_streams.h"
#include "gateway/core/job_shape.h"
#include "gateway/gpu/device_tensor.h"
#include "gateway/gpu/placement.h"
#include "gateway/ingress/ingress.h"

namespace gradgate::gateway {

/// A placement probe made (placement_probe.h), for metrics.
struct PlacementRecord {
  std::string_view codec;  // the codec's name ("topk", static): fit for a metric label
  int device = 0;          // the GPU
  size_t sample_elements = 0;
  PlacementProbe probe;
};

class TensorCodecs {
 public:
  /// The part of the configuration that says which codecs tensors run, where and in how much
  /// memory.
  struct Settings {
    std::string codec;  // compression.codec
    uint64_t min_compress_elements = 0;
    CollectiveMode collective = CollectiveMode::kAuto;
    PlacementMode placement = PlacementMode::kAuto;
    uint64_t segment_bytes = 0;
    uint64_t memory_cap_bytes = 0;  // streams.residual_memory_cap_bytes
  };

  /// For the tensors of `job`.
  TensorCodecs(JobShape job, Settings settings) : job_(job), settings_(std::move(settings)) {}

  const JobShape& job() const { return job_; }
  const Settings& settings() const { return settings_; }
  /// kInvalidArgument, naming compression.codec, when the job cannot run the configured codec.
  Status check_configured() const;
  /// What the config says `tensor` runs with: its codec, or none below min_compress_elements.
  std::string configured(const TensorSpec& tensor) const;
  /// `spec` as `tensor` runs it: for codec none on a 16-bit tensor, that dtype's codec without
  /// error feedback (dense in its own precision, as DDP's all-reduce sends it).
  std::string for_tensor(const TensorSpec& tensor, const std::string& spec) const;
  /// The codec of `spec` for `tensor`'s buffers (GPU or CPU; `device` null for buffers in host
  /// memory), logged when a tensor in GPU memory runs on the CPU.
  Result<Placement> place(const std::string& spec, const TensorSpec& tensor, DeviceTensor* device);
  /// The collective algorithm `codec` runs for `tensor`.
  Result<Algorithm> algorithm(const kernels::Codec& codec, const TensorSpec& tensor) const;
  /// Streams of `codec` for tensor `id`, within the memory cap beside the `in_use` bytes.
  Result<TensorStreams> make_streams(const TensorSpec& spec, uint32_t id,
                                     const kernels::Codec& codec, size_t in_use) const;
  /// kResourceExhausted when `wanted` more bytes beside `in_use` pass the memory cap.
  Status check_cap(const std::string& tensor, size_t wanted, size_t in_use) const;
  /// The host memory a tensor's node sum takes: its fp32 elements where the sum is made on the
  /// host (buffers in GPU memory with the codec on the CPU; host buffers not reduced in place).
  size_t host_node_sum_bytes(const TensorSpec& spec, bool gpu_buffers, bool on_gpu) const;
  std::vector<PlacementRecord> probes() const;

 private:
  Result<PlacementProbe> probe(const kernels::Codec& gpu, const kernels::Codec& cpu,
                               const TensorSpec& tensor, DeviceTensor& device);

  const JobShape job_;
  const Settings settings_;
  using ProbeKey = std::tuple<std::string, int, size_t>;  // codec spec, GPU, sample elements
  std::map<ProbeKey, PlacementRecord> probes_;
};

}  // namespace gradgate::gateway
