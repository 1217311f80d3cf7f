// The element walk of the tiled kernels: thread t handles tile elements t, t + kTileThreads, ...
// In a full tile each thread loads all of its elements before it computes and stores any, with a
// fixed trip count, so all its loads are in flight at once (the pointers may alias, so the
// compiler cannot hoist a load above an earlier store by itself). The short last tile keeps the
// plain loop. Each element is loaded and stored at the same index by the same thread in both
// paths, so exact in-place use (out == input) stays valid. PERF_NOTES.md has the reasons.
#pragma once

#include <cstdint>

#include "tile_crc.cuh"

namespace gradgate::kernels::cuda {

/// Calls store(j, load(j)) for every element j < count of a tile of kTileElements elements;
/// load(j) reads global memory only, store(j, loaded) computes, writes and stages.
template <uint32_t kTileElements, typename Load, typename Store>
__device__ inline void for_tile_elements(uint32_t count, Load load, Store store) {
  static_assert(kTileElements % kTileThreads == 0, "full tiles give each thread equal shares");
  constexpr uint32_t kPerThread = kTileElements / kTileThreads;
  if (count == kTileElements) {
    decltype(load(0u)) loaded[kPerThread];
#pragma unroll
    for (uint32_t k = 0; k < kPerThread; ++k) loaded[k] = load(threadIdx.x + k * kTileThreads);
#pragma unroll
    for (uint32_t k = 0; k < kPerThread; ++k) store(threadIdx.x + k * kTileThreads, loaded[k]);
  } else {
    for (uint32_t j = threadIdx.x; j < count; j += kTileThreads) store(j, load(j));
  }
}

}  // namespace gradgate::kernels::cuda
