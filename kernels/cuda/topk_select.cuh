// What the two files of topk's selection kernels share (topk_collect_kernels.cu: the first pass;
// topk_select_kernels.cu: the radix select's histograms and keep): the block size, the ranking of
// a tile's flagged items in index order (tile_order.h) and the launch sizes.
#pragma once

#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "cuda_check.h"
#include "tile_order.h"
#include "topk_launch.h"

namespace gradgate::kernels::cuda {

using tile_order::kItems;
using tile_order::kLanes;
using tile_order::kRows;
using tile_order::kTile;
inline constexpr uint32_t kSelectThreads = tile_order::kThreads;

using TileScan = cub::BlockScan<unsigned long long, kSelectThreads>;

// The ranks in index order of a tile's flagged items (tile_order.h): one block scan of the
// threads' packed row counts. All threads of the block call it, in uniform control flow.
struct TileRanks {
  unsigned long long prefix = 0;
  unsigned long long aggregate = 0;

  __device__ TileRanks(TileScan::TempStorage& storage, uint32_t flags) {
    TileScan(storage).ExclusiveSum(tile_order::row_counts(flags), prefix, aggregate);
  }
  __device__ uint32_t count() const { return tile_order::total(aggregate); }
  __device__ uint32_t of(uint32_t flags, int slot) const {
    return tile_order::rank(prefix, aggregate, flags, slot);
  }
};

// Writes this thread's flagged items of a tile whose first item goes to `start`: the pair
// (index_of(slot), value[slot]) at start + its rank, where the list has room. Returns the slots
// written.
template <typename IndexOf>
__device__ inline uint32_t write_ranked(const PairList& out, uint64_t start, const TileRanks& ranks,
                                        uint32_t flags, const float (&value)[kItems],
                                        IndexOf index_of) {
  uint32_t stored = 0;
#pragma unroll
  for (int slot = 0; slot < kItems; ++slot) {
    if (!((flags >> slot) & 1u)) continue;
    const uint64_t position = start + ranks.of(flags, slot);
    if (position < out.capacity) {
      out.index[position] = index_of(slot);
      out.value[position] = value[slot];
      stored |= 1u << slot;
    }
  }
  return stored;
}

// The blocks of `kernel` (kSelectThreads threads and `dynamic_shared` bytes of dynamic shared
// memory each) that the current GPU holds at once: asked of the runtime on the thread's first
// launch per kernel and GPU, then remembered (per thread, as Scratch::current keeps its scratch).
// The first time also lets the kernel have more than the default 48 KiB of dynamic shared memory
// where it asks for that.
template <typename Kernel>
Result<uint64_t> resident_blocks_of(Kernel kernel, size_t dynamic_shared) {
  thread_local std::map<std::pair<const void*, int>, uint64_t> known;
  int device = 0;
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  const auto key = std::make_pair(reinterpret_cast<const void*>(kernel), device);
  if (const auto it = known.find(key); it != known.end()) return it->second;
  if (dynamic_shared > 48 * 1024) {
    GRADGATE_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(dynamic_shared)));
  }
  int multiprocessors = 0, per_multiprocessor = 0;
  GRADGATE_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &per_multiprocessor, kernel, kSelectThreads, dynamic_shared));
  const auto resident = static_cast<uint64_t>(std::max(multiprocessors * per_multiprocessor, 1));
  known.emplace(key, resident);
  return resident;
}

// Blocks for a kernel over `count` items, `per_block` a tile: at most what the GPU holds at once.
template <typename Kernel>
Result<unsigned> resident_blocks(Kernel kernel, uint64_t count, uint64_t per_block,
                                 size_t dynamic_shared = 0) {
  auto resident = resident_blocks_of(kernel, dynamic_shared);
  if (!resident.ok()) return resident.status();
  const uint64_t needed = std::max<uint64_t>((count + per_block - 1) / per_block, 1);
  return static_cast<unsigned>(std::min(needed, *resident));
}

// Checks that a ListedTiles has room for the tiles of n elements.
inline Status check_listed_tiles(const ListedTiles& listed, uint64_t n) {
  if (tile_order::tile_count(n) <= listed.max_tiles) return {};
  return Status(ErrorCode::kInternal, "topk first pass over " + std::to_string(n) +
                                          " elements exceeds its tile records (" +
                                          std::to_string(listed.max_tiles) + " tiles)");
}

}  // namespace gradgate::kernels::cuda
