// The randomk kernels (randomk_launch.h): one thread per selected element.
#include "cuda_check.h"
#include "device_tally.cuh"
#include "randomk_launch.h"
#include "randomk_strata.h"

namespace gradgate::kernels::cuda {
namespace {

__global__ void gather_kernel(const float* g, float* e, RandomkSelection selection,
                              uint32_t* payload) {
  if (grid_first() == 0) {
    payload[0] = static_cast<uint32_t>(selection.key);
    payload[1] = static_cast<uint32_t>(selection.key >> 32);
  }
  float* values = reinterpret_cast<float*>(payload + 2);
  for (uint64_t j = grid_first(); j < selection.k; j += grid_stride()) {
    const uint32_t i = randomk::stratum_index(j, selection.k, selection.n, selection.key);
    if (e) {
      values[j] = e[i];
      e[i] = 0.0f;
    } else {
      values[j] = g[i];
    }
  }
}

__global__ void scatter_add_kernel(const float* values, RandomkSelection selection, float* out) {
  for (uint64_t j = grid_first(); j < selection.k; j += grid_stride()) {
    out[randomk::stratum_index(j, selection.k, selection.n, selection.key)] += values[j];
  }
}

}  // namespace

Status launch_randomk_gather(const float* g, float* e, const RandomkSelection& selection,
                             std::byte* payload, cudaStream_t stream) {
  gather_kernel<<<element_blocks(selection.k), kElementThreads, 0, stream>>>(
      g, e, selection, reinterpret_cast<uint32_t*>(payload));
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

Status launch_randomk_scatter_add(const float* values, const RandomkSelection& selection,
                                  float* out, cudaStream_t stream) {
  scatter_add_kernel<<<element_blocks(selection.k), kElementThreads, 0, stream>>>(values, selection,
                                                                                  out);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

}  // namespace gradgate::kernels::cuda
