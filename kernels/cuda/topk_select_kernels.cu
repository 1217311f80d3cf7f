// The radix select and keep of topk's selection (topk_launch.h): the histograms of the order keys,
// and keep, which puts the kept candidates in index order from the tile counts of the first pass
// (topk_collect_kernels.cu), so the selection needs no sort. The whole-array keep compacts in
// index order with a decoupled look-back.
#include <cub/agent/single_pass_scan_operators.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cstddef>
#include <cuda/std/functional>
#include <string>

#include "device_tally.cuh"
#include "topk_select.cuh"

namespace gradgate::kernels::cuda {
namespace {

using TileState = cub::ScanTileState<uint32_t>;

// The tiles of one ordered compaction: their look-back descriptors and the counter that hands
// them out in launch order. A block waits only on tiles taken before its own, which blocks that
// already run hold, so the look-back cannot deadlock whatever the grid and whatever else runs.
struct TileQueue {
  TileState state;
  unsigned* next;
};

// The counter of the queue lies in the first kCounterBytes of an OrderedTiles' memory, the
// descriptors after it.
constexpr size_t kCounterBytes = 256;

__global__ void reset_tiles_kernel(TileQueue queue, int tiles) {
  queue.state.InitializeStatus(tiles);
  if (blockIdx.x == 0 && threadIdx.x == 0) *queue.next = 0;
}

// A queue of the tiles of `items` items in `tiles`' memory, reset on `stream`.
Result<TileQueue> reset_tile_queue(const OrderedTiles& tiles, uint64_t items, cudaStream_t stream) {
  const uint64_t count = tile_order::tile_count(items);
  if (count > tiles.max_tiles) {
    return Status(ErrorCode::kInternal, "topk compaction of " + std::to_string(items) +
                                            " items exceeds its tile state (" +
                                            std::to_string(tiles.max_tiles) + " tiles)");
  }
  auto* base = static_cast<std::byte*>(tiles.memory);
  TileQueue queue;
  queue.next = reinterpret_cast<unsigned*>(base);
  size_t state_bytes = 0;
  GRADGATE_CUDA_RETURN_IF_ERROR(TileState::AllocationSize(static_cast<int>(count), state_bytes));
  GRADGATE_CUDA_RETURN_IF_ERROR(
      queue.state.Init(static_cast<int>(count), base + kCounterBytes, state_bytes));
  const auto blocks =
      static_cast<unsigned>(std::max<uint64_t>((count + kSelectThreads - 1) / kSelectThreads, 1));
  reset_tiles_kernel<<<blocks, kSelectThreads, 0, stream>>>(queue, static_cast<int>(count));
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return queue;
}

// What OrderedAppend::append did with a tile.
struct Appended {
  uint32_t tile_count;  // the items the whole tile flagged
  uint32_t stored;      // this thread's slots written to the list (flagged, within its capacity)
};

// Appends the flagged items of each tile to a PairList in index order: one block scan of the
// threads' packed row counts ranks the tile's items (tile_order.h), and a decoupled look-back
// (CUB's TilePrefixCallbackOp) gives the tile's place after its predecessors'. Items past the
// list's capacity are counted, not written. All threads of the block call each member, in uniform
// control flow.
class OrderedAppend {
 public:
  using LookBack = cub::TilePrefixCallbackOp<uint32_t, ::cuda::std::plus<uint32_t>, TileState>;
  struct Storage {
    typename TileScan::TempStorage scan;
    typename LookBack::TempStorage look_back;
    uint32_t tile;
    uint32_t start;
  };

  __device__ OrderedAppend(Storage& storage, const TileQueue& queue, const PairList& out)
      : storage_(storage), queue_(queue), out_(out) {}

  // The next tile in launch order, the same for every thread.
  __device__ uint32_t next_tile() {
    if (threadIdx.x == 0) storage_.tile = atomicAdd(queue_.next, 1u);
    __syncthreads();
    return storage_.tile;
  }

  // Appends this thread's items of `tile` whose bit is set in `flags` (tile_order's slots): the
  // pair (index_of(slot), value[slot]).
  template <typename IndexOf>
  __device__ Appended append(uint32_t tile, uint32_t flags, const float (&value)[kItems],
                             IndexOf index_of) {
    const TileRanks ranks(storage_.scan, flags);
    const uint32_t count = ranks.count();
    if (threadIdx.x < 32) {
      uint32_t before = 0;
      if (tile == 0) {
        if (threadIdx.x == 0) queue_.state.SetInclusive(0, count);
      } else {
        LookBack look_back(queue_.state, storage_.look_back, ::cuda::std::plus<uint32_t>{},
                           static_cast<int>(tile));
        before = look_back(count);
      }
      if (threadIdx.x == 0) storage_.start = before;
    }
    __syncthreads();
    return {count, write_ranked(out_, storage_.start, ranks, flags, value, index_of)};
  }

 private:
  Storage& storage_;
  TileQueue queue_;
  PairList out_;
};

__device__ inline uint32_t source_index(const PairSource& source, uint64_t j) {
  return source.index ? source.index[j] : static_cast<uint32_t>(j);
}

// This thread's pairs of the tile from `first` on, in tile_order's slots (index and value 0 past
// the end): 16-byte loads where the tile is full and the arrays aligned, all loads first.
__device__ inline void load_tile(const PairSource& source, uint64_t first,
                                 uint32_t (&index)[kItems], float (&value)[kItems]) {
  const bool vectors =
      first + kTile <= source.count &&
      (reinterpret_cast<uintptr_t>(source.index) | reinterpret_cast<uintptr_t>(source.value)) %
              16 ==
          0;
  if (vectors) {
#pragma unroll
    for (int row = 0; row < kRows; ++row) {
      const uint64_t vector = first / kLanes + threadIdx.x + row * kSelectThreads;
      const float4 v = reinterpret_cast<const float4*>(source.value)[vector];
      const uint4 i =
          source.index ? reinterpret_cast<const uint4*>(source.index)[vector] : uint4{0, 1, 2, 3};
      const uint32_t base = source.index ? 0 : static_cast<uint32_t>(vector * kLanes);
      const uint32_t is[kLanes] = {base + i.x, base + i.y, base + i.z, base + i.w};
      const float vs[kLanes] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int lane = 0; lane < kLanes; ++lane) {
        index[row * kLanes + lane] = is[lane];
        value[row * kLanes + lane] = vs[lane];
      }
    }
    return;
  }
#pragma unroll
  for (int slot = 0; slot < kItems; ++slot) {
    const uint64_t p = first + tile_order::item_offset(threadIdx.x, slot);
    index[slot] = p < source.count ? source_index(source, p) : 0;
    value[slot] = p < source.count ? source.value[p] : 0.0f;
  }
}

// The histogram of the order keys in `range`: tiles grid-stride (their order does not matter).
__global__ void __launch_bounds__(kSelectThreads)
    histogram_kernel(PairSource source, topk::KeyRange range, uint32_t* bins) {
  __shared__ uint32_t local[topk::kSelectBins];
  for (uint32_t b = threadIdx.x; b < topk::kSelectBins; b += kSelectThreads) local[b] = 0;
  __syncthreads();
  const uint64_t tiles = tile_order::tile_count(source.count);
  for (uint64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const uint64_t first = tile * kTile;
    uint32_t index[kItems];
    float value[kItems];
    load_tile(source, first, index, value);
#pragma unroll
    for (int slot = 0; slot < kItems; ++slot) {
      const uint64_t key = topk::order_key(value[slot], index[slot]);
      if (first + tile_order::item_offset(threadIdx.x, slot) < source.count && range.holds(key)) {
        atomicAdd(&local[range.bin(key)], 1u);
      }
    }
  }
  __syncthreads();
  for (uint32_t b = threadIdx.x; b < topk::kSelectBins; b += kSelectThreads) {
    if (local[b] != 0) atomicAdd(&bins[b], local[b]);
  }
}

// Appends the pairs at or above the cut in the order of `source`: tiles taken in launch order.
// With `restore`, restore[i] = v for each pair (i, v) below the cut. Three blocks per SM, as the
// first pass.
__global__ void __launch_bounds__(kSelectThreads, 3)
    keep_kernel(PairSource source, uint64_t cut, PairList out, TileQueue queue, float* restore,
                Tally* tally) {
  __shared__ OrderedAppend::Storage storage;
  OrderedAppend append(storage, queue, out);
  uint32_t kept = 0;
  const uint64_t tiles = tile_order::tile_count(source.count);
  for (;;) {
    const uint32_t tile = append.next_tile();
    if (tile >= tiles) break;
    const uint64_t first = static_cast<uint64_t>(tile) * kTile;
    uint32_t index[kItems];
    float value[kItems];
    load_tile(source, first, index, value);
    uint32_t flags = 0;
#pragma unroll
    for (int slot = 0; slot < kItems; ++slot) {
      const bool in_range = first + tile_order::item_offset(threadIdx.x, slot) < source.count;
      const bool at_cut = topk::order_key(value[slot], index[slot]) >= cut;
      flags |= static_cast<uint32_t>(in_range && at_cut) << slot;
      if (restore && in_range && !at_cut) restore[index[slot]] = value[slot];
    }
    kept +=
        append.append(tile, flags, value, [&index](int slot) { return index[slot]; }).tile_count;
  }
  if (threadIdx.x == 0 && kept != 0) {
    atomicAdd(&tally->count[2], static_cast<unsigned long long>(kept));
  }
}

__global__ void put_kernel(PairSource pairs, float* out) {
  for (uint64_t j = grid_first(); j < pairs.count; j += grid_stride()) {
    out[pairs.index[j]] = pairs.value[j];
  }
}

constexpr uint32_t kSelectWarps = kSelectThreads / 32;

// The calling warp's tile in a warp-per-tile kernel, and the stride to its next one.
__device__ inline uint64_t warp_tile() {
  return (static_cast<uint64_t>(blockIdx.x) * kSelectThreads + threadIdx.x) / 32;
}
__device__ inline uint64_t warp_tile_stride() {
  return static_cast<uint64_t>(gridDim.x) * kSelectWarps;
}

// keep over a first pass's list, step 1, a warp per tile of the first pass: kept[tile] = how many
// of the tile's pairs have an order key >= cut; their sum goes to count[2], one atomic per block.
__global__ void __launch_bounds__(kSelectThreads)
    count_kept_kernel(PairSource list, ListedTiles listed, uint64_t tiles, uint64_t cut,
                      Tally* tally) {
  __shared__ uint32_t warp_kept[kSelectWarps];
  const uint32_t lane = threadIdx.x % 32;
  uint32_t warp_total = 0;
  for (uint64_t tile = warp_tile(); tile < tiles; tile += warp_tile_stride()) {
    const uint32_t first = listed.first[tile];
    const uint32_t count = listed.count[tile];
    uint32_t kept = 0;
    for (uint32_t j = lane; j < count; j += 32) {
      kept += topk::order_key(list.value[first + j], list.index[first + j]) >= cut;
    }
    kept = __reduce_add_sync(kFullWarp, kept);
    if (lane == 0) listed.kept[tile] = kept;
    warp_total += kept;
  }
  if (lane == 0) warp_kept[threadIdx.x / 32] = warp_total;
  __syncthreads();
  if (threadIdx.x != 0) return;
  unsigned long long block_total = 0;
  for (uint32_t w = 0; w < kSelectWarps; ++w) block_total += warp_kept[w];
  if (block_total != 0) atomicAdd(&tally->count[2], block_total);
}

// keep over a first pass's list, step 2, a warp per tile, after kept[] became the exclusive sum
// of the counts: the tile's kept pairs go to out from kept[tile] on, in the tile's (index) order;
// with `restore`, the others' values go back there.
__global__ void __launch_bounds__(kSelectThreads)
    write_kept_kernel(PairSource list, ListedTiles listed, uint64_t tiles, uint64_t cut,
                      PairList out, float* restore) {
  const uint32_t lane = threadIdx.x % 32;
  for (uint64_t tile = warp_tile(); tile < tiles; tile += warp_tile_stride()) {
    const uint32_t first = listed.first[tile];
    const uint32_t count = listed.count[tile];
    uint64_t at = listed.kept[tile];
    for (uint32_t round = 0; round < count; round += 32) {
      const uint32_t j = round + lane;
      const bool present = j < count;
      const uint32_t index = present ? list.index[first + j] : 0;
      const float value = present ? list.value[first + j] : 0.0f;
      const bool keep = present && topk::order_key(value, index) >= cut;
      const unsigned kept = __ballot_sync(kFullWarp, keep);
      if (keep) {
        const uint64_t position = at + __popc(kept & ((1u << lane) - 1));
        if (position < out.capacity) {
          out.index[position] = index;
          out.value[position] = value;
        }
      } else if (present && restore) {
        restore[index] = value;
      }
      at += __popc(kept);
    }
  }
}

}  // namespace

Status launch_topk_keep_listed(const PairSource& list, const ListedTiles& listed, uint64_t n,
                               uint64_t cut, const PairList& out, float* restore, Tally* tally,
                               cudaStream_t stream) {
  GRADGATE_RETURN_IF_ERROR(check_listed_tiles(listed, n));
  const uint64_t tiles = tile_order::tile_count(n);
  auto counting = resident_blocks(count_kept_kernel, tiles, kSelectWarps);
  if (!counting.ok()) return counting.status();
  count_kept_kernel<<<*counting, kSelectThreads, 0, stream>>>(list, listed, tiles, cut, tally);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  size_t temp_bytes = listed.temp_bytes;
  GRADGATE_CUDA_RETURN_IF_ERROR(cub::DeviceScan::ExclusiveSum(
      listed.temp, temp_bytes, listed.kept, listed.kept, static_cast<int>(tiles), stream));
  auto writing = resident_blocks(write_kept_kernel, tiles, kSelectWarps);
  if (!writing.ok()) return writing.status();
  write_kept_kernel<<<*writing, kSelectThreads, 0, stream>>>(list, listed, tiles, cut, out,
                                                             restore);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

Status launch_topk_histogram(const PairSource& source, const topk::KeyRange& range, uint32_t* bins,
                             cudaStream_t stream) {
  GRADGATE_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(bins, 0, topk::kSelectBins * sizeof(uint32_t), stream));
  if (source.count == 0) return {};
  // Each block adds its non-zero bins with one atomic each: no more blocks than run at once.
  auto blocks = resident_blocks(histogram_kernel, source.count, kTile);
  if (!blocks.ok()) return blocks.status();
  histogram_kernel<<<*blocks, kSelectThreads, 0, stream>>>(source, range, bins);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

Status launch_topk_keep(const PairSource& source, uint64_t cut, const PairList& out,
                        const OrderedTiles& tiles, float* restore, Tally* tally,
                        cudaStream_t stream) {
  if (source.count == 0) return {};
  auto queue = reset_tile_queue(tiles, source.count, stream);
  if (!queue.ok()) return queue.status();
  auto blocks = resident_blocks(keep_kernel, source.count, kTile);
  if (!blocks.ok()) return blocks.status();
  keep_kernel<<<*blocks, kSelectThreads, 0, stream>>>(source, cut, out, *queue, restore, tally);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

Status launch_topk_put(const PairSource& pairs, float* out, cudaStream_t stream) {
  if (pairs.count == 0) return {};
  put_kernel<<<element_blocks(pairs.count), kElementThreads, 0, stream>>>(pairs, out);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

Result<size_t> listed_tiles_temp_bytes(uint64_t max_tiles) {
  size_t temp = 0;
  GRADGATE_CUDA_RETURN_IF_ERROR(
      cub::DeviceScan::ExclusiveSum(nullptr, temp, static_cast<uint32_t*>(nullptr),
                                    static_cast<uint32_t*>(nullptr), static_cast<int>(max_tiles)));
  return temp;
}

Result<size_t> ordered_tiles_bytes(uint64_t max_tiles) {
  size_t state_bytes = 0;
  GRADGATE_CUDA_RETURN_IF_ERROR(
      TileState::AllocationSize(static_cast<int>(max_tiles), state_bytes));
  return kCounterBytes + state_bytes;
}

}  // namespace gradgate::kernels::cuda
