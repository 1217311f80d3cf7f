// Measures where a codec runs faster for a tensor in GPU memory (compression.placement: auto):
// one step of the codec on a sample of the tensor, timed on the GPU (encode there, the frame
// staged to host memory and back, decode there) and on the CPU (the node sum copied to host
// memory, encode and decode there, the result copied back). Both include what the collective's
// staging costs on that side, so the faster one is the one the tensor's steps will be faster on.
//
// The sample is Gaussian, at most kProbeElements values (a shaped tensor keeps its columns), each
// side warmed up by one step before the timed one: a few milliseconds per probe, which the gateway
// makes once per codec, GPU and sample size.
#pragma once

#include <cstddef>

#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/device_ops.h"

namespace gradgate::gateway {

inline constexpr size_t kProbeElements = size_t{1} << 22;

struct PlacementProbe {
  double gpu_elements_per_second = 0.0;
  double cpu_elements_per_second = 0.0;
};

/// The values of the sample for a tensor described by `desc`: elements, rows and cols.
kernels::TensorDesc probe_sample(const kernels::TensorDesc& desc);

/// Times `gpu_codec` (a CUDA codec) on `queue`'s GPU and `cpu_codec` (the same codec on the CPU)
/// on probe_sample(desc). Any CUDA failure is returned (the caller keeps the GPU).
Result<PlacementProbe> probe_placement(const kernels::Codec& gpu_codec,
                                       const kernels::Codec& cpu_codec, kernels::DeviceQueue& queue,
                                       const kernels::TensorDesc& desc);

}  // namespace gradgate::gateway
