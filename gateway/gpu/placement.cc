#include "gateway/gpu/placement.h"

#include <spdlog/fmt/fmt.h>

#include "gateway/collective/collective_engine.h"
#include "gateway/collective/tensor_streams.h"
#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/make_codec_for.h"

namespace gradgate::gateway {

Result<Placement> place_codec(const std::string& spec, bool gpu_buffers, CollectiveMode mode,
                              uint32_t nodes, size_t elements, PlacementMode preference,
                              const PlacementProber& prober) {
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
  if (preference == PlacementMode::kCpu) {
    placement.cpu_reason = "compression.placement is cpu";
    return placement;
  }
  // A codec whose decoding differs between the sides must be placed alike on every gateway: not by
  // a measurement that can come out differently on each.
  if (preference == PlacementMode::kAuto && prober &&
      codec_traits(params->id).decodes_alike_on_gpu_and_cpu) {
    auto measured = prober(**gpu, *placement.codec);
    if (!measured.ok()) {
      placement.probe_error = measured.status().to_string();
    } else {
      placement.probe = *measured;
      if (measured->cpu_elements_per_second > measured->gpu_elements_per_second) {
        placement.cpu_reason = fmt::format(
            "measured faster on the CPU ({:.3g} vs {:.3g} elements/s on the GPU, staging included)",
            measured->cpu_elements_per_second, measured->gpu_elements_per_second);
        return placement;
      }
    }
  }
  placement.host_codec = std::move(placement.codec);
  placement.codec = std::move(gpu).value();
  placement.on_gpu = true;
  return placement;
}

}  // namespace gradgate::gateway
