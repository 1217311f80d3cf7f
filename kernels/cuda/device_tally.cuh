// Device helpers shared by the kernels: warp-wide tallies into a Tally, and the shape of the
// element-wise (grid-stride) kernels.
#pragma once

#include <cstdint>

#include "launch.h"

namespace gradgate::kernels::cuda {

inline constexpr unsigned kFullWarp = 0xFFFFFFFFu;

/// Adds every lane's `count` to *counter with one atomic per warp. All 32 lanes must call it.
__device__ inline void tally_count(unsigned long long* counter, uint32_t count) {
  count = __reduce_add_sync(kFullWarp, count);
  if (threadIdx.x % 32 == 0 && count != 0)
    atomicAdd(counter, static_cast<unsigned long long>(count));
}

/// Raises *max to the largest lane's `value`, one atomic per warp. All 32 lanes must call it.
__device__ inline void tally_max(unsigned int* max, uint32_t value) {
  value = __reduce_max_sync(kFullWarp, value);
  if (threadIdx.x % 32 == 0 && value != 0) atomicMax(max, value);
}

/// Adds the block's `count`s to *counter and raises *largest to its largest `value`: one atomic
/// each per block, where per-warp tallies would send thousands to one address. All kThreads
/// threads of the block must call it, once per block.
template <uint32_t kThreads>
__device__ inline void block_tally(unsigned long long* counter, uint32_t count,
                                   unsigned int* largest, uint32_t value) {
  constexpr uint32_t kWarps = kThreads / 32;
  __shared__ uint32_t warp_count[kWarps];
  __shared__ uint32_t warp_value[kWarps];
  count = __reduce_add_sync(kFullWarp, count);
  value = __reduce_max_sync(kFullWarp, value);
  if (threadIdx.x % 32 == 0) {
    warp_count[threadIdx.x / 32] = count;
    warp_value[threadIdx.x / 32] = value;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  unsigned long long total = 0;
  uint32_t top = 0;
  for (uint32_t w = 0; w < kWarps; ++w) {
    total += warp_count[w];
    top = max(top, warp_value[w]);
  }
  if (total != 0) atomicAdd(counter, total);
  if (top != 0) atomicMax(largest, top);
}

/// |level| of a signed wire level, exact for every int32.
__device__ inline uint32_t level_magnitude(int32_t level) {
  return level < 0 ? 0u - static_cast<uint32_t>(level) : static_cast<uint32_t>(level);
}

/// Element-wise kernels: kElementThreads threads a block, grid-stride over n elements.
inline constexpr int kElementThreads = 256;

inline unsigned element_blocks(uint64_t n) {
  constexpr uint64_t kMaxBlocks = 32768;  // enough to fill any current GPU; larger n loop
  const uint64_t blocks = (n + kElementThreads - 1) / kElementThreads;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

/// First element and stride of the calling thread in a grid-stride loop.
__device__ inline uint64_t grid_first() {
  return static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline uint64_t grid_stride() { return static_cast<uint64_t>(gridDim.x) * blockDim.x; }

}  // namespace gradgate::kernels::cuda
