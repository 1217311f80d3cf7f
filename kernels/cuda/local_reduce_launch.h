// Host-side entry points of the node-sum kernels (local_reduce_kernels.cu): the device half of
// kernels::DeviceQueue's accumulate_fp32 and convert_from_fp32. Host-only: compiles without nvcc.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gradgate/base/status.h"
#include "gradgate/kernels/device_ops.h"

namespace gradgate::kernels::cuda {

/// out = in (first) or out += in, `in` holding n values of `type` converted to fp32.
Status launch_accumulate_fp32(const void* in, ElementType type, float* out, uint64_t n, bool first,
                              cudaStream_t stream);
/// out = values as `type` (round to nearest even), n values.
Status launch_convert_from_fp32(const float* values, ElementType type, void* out, uint64_t n,
                                cudaStream_t stream);

}  // namespace gradgate::kernels::cuda
