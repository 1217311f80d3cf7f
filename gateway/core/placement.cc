#include "gateway/core/placement.h"

#include "gateway/collective/tensor_streams.h"
#include "gradgate/kernels/codec_spec.h"

namespace gradgate::gateway {

Result<Placement> place_codec(const std::string& spec, bool gpu_buffers, CollectiveMode mode,
                              uint32_t nodes, size_t elements) {
  auto params = kernels::parse_codec_spec(spec);
  if (!params.ok()) return params.status();
  auto cpu = kernels::make_cpu_codec(*params);
  if (!cpu.ok()) return cpu.status();
  Placement placement;
  placement.codec = std::move(cpu).value();
  if (!gpu_buffers) return placement;
  auto algorithm = choose_algorithm(*placement.codec, mode, nodes, elements);
  if (algorithm.ok() && *algorithm == Algorithm::kAggregator) {
    placement.cpu_reason = "the aggregator collective runs on the CPU";
    return placement;
  }
  auto gpu = kernels::make_codec_for(*params, kernels::MemoryKind::kDevice);
  if (!gpu.ok()) {
    placement.cpu_reason = gpu.status().message();
    return placement;
  }
  placement.host_codec = std::move(placement.codec);
  placement.codec = std::move(gpu).value();
  placement.on_gpu = true;
  return placement;
}

}  // namespace gradgate::gateway
