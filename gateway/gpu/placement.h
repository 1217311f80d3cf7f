// Where a tensor's codec runs. A tensor whose local workers' buffers are GPU memory can run its
// codec on the GPU when the codec has a CUDA implementation and the collective is one the GPU
// path runs (ring or all-gather); it does unless compression.placement says cpu, or says auto and
// a probe (placement_probe.h) measures the CPU faster for it. Otherwise it runs on the CPU, the
// node sum (made on the GPU) staged through host memory. Buffers in host memory run on the CPU.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "gateway/gpu/placement_probe.h"
#include "gradgate/base/collective_mode.h"
#include "gradgate/base/placement_mode.h"
#include "gradgate/kernels/codec.h"

namespace gradgate::gateway {

struct Placement {
  /// The codec of the collective: a CUDA codec when on_gpu, a CPU codec otherwise.
  std::unique_ptr<kernels::Codec> codec;
  /// On the GPU: the same codec on the CPU, which sums frames held in host memory.
  std::unique_ptr<kernels::Codec> host_codec;
  bool on_gpu = false;
  /// A tensor in GPU memory placed on the CPU: why ("" otherwise).
  std::string cpu_reason;
  /// Under PlacementMode::kAuto: what the probe measured, or why it could not.
  std::optional<PlacementProbe> probe;
  std::string probe_error;
};

/// Times a codec both ways for the tensor: probe_placement() of placement_probe.h, bound to the
/// tensor's GPU and shape (and possibly answered from a cache).
using PlacementProber =
    std::function<Result<PlacementProbe>(const kernels::Codec& gpu, const kernels::Codec& cpu)>;

/// The placement of codec `spec` for a tensor of `elements` values among `nodes` gateways under
/// collective `mode`, its buffers in GPU memory or not, as `preference` (compression.placement)
/// says; kAuto asks `prober` where both are possible (without one, when it fails, and for
/// powersgd, whose decoding is not bit-identical on the two sides: the GPU).
/// An error only for a spec that is no codec; a GPU that cannot run it places the tensor on the
/// CPU.
Result<Placement> place_codec(const std::string& spec, bool gpu_buffers, CollectiveMode mode,
                              uint32_t nodes, size_t elements,
                              PlacementMode preference = PlacementMode::kGpu,
                              const PlacementProber& prober = {});

}  // namespace gradgate::gateway
