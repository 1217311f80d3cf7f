// Host-side entry points of the randomk kernels: the gather of the selected elements into a
// payload and their scatter out of one, the indices regenerated from the selection key
// (randomk_strata.h). Host-only: compiles without nvcc.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "launch.h"

namespace gradgate::kernels::cuda {

/// The elements a randomk payload carries: k of n, chosen by `key`.
struct RandomkSelection {
  uint64_t n;
  uint64_t k;
  uint64_t key;
};

/// Writes the payload [u64 key][k fp32 values] (`payload` 4-byte aligned): the selected values
/// of e, which become 0 there, or of g without a residual (e == nullptr).
Status launch_randomk_gather(const float* g, float* e, const RandomkSelection& selection,
                             std::byte* payload, cudaStream_t stream);

/// out[index of value j] += values[j].
Status launch_randomk_scatter_add(const float* values, const RandomkSelection& selection,
                                  float* out, cudaStream_t stream);

}  // namespace gradgate::kernels::cuda
