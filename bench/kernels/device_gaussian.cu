#include "cuda_check.h"
#include "device_gaussian.h"
#include "gaussian.h"

namespace gradgate::bench {
namespace {

__global__ void gaussian_kernel(float* out, uint64_t n, uint64_t seed) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t block = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; block * 4 < n;
       block += stride) {
    float values[4];
    gaussian4(block, seed, values);
    const uint64_t first = block * 4;
    if (first + 4 <= n) {
      *reinterpret_cast<float4*>(out + first) = {values[0], values[1], values[2], values[3]};
    } else {
      for (uint64_t i = first; i < n; ++i) out[i] = values[i - first];
    }
  }
}

}  // namespace

Status fill_gaussian(float* out, size_t n, uint64_t seed, cudaStream_t stream) {
  constexpr unsigned kThreads = 256;
  const uint64_t blocks = (n + 4ull * kThreads - 1) / (4ull * kThreads);
  gaussian_kernel<<<static_cast<unsigned>(blocks < 65536 ? blocks : 65536), kThreads, 0, stream>>>(
      out, n, seed);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

}  // namespace gradgate::bench
