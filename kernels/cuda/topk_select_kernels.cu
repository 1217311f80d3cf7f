// The selection kernels of topk (topk_launch.h): the fused first pass that collects candidates,
// the histograms of the radix select, and keep. The first pass ranks each tile's candidates in
// index order (tile_order.h) and places the tile with one atomic, never waiting on another tile;
// keep then puts the kept candidates in index order from the tiles' counts, so the selection
// needs no sort. The whole-array keep compacts in index order with a decoupled look-back.
#include <cub/agent/single_pass_scan_operators.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include <cuda_pipeline.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cuda/std/functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "cuda_check.h"
#include "device_tally.cuh"
#include "gradgate/kernels/element_rules.h"
#include "tile_order.h"
#include "topk_launch.h"

namespace gradgate::kernels::cuda {
namespace {

using tile_order::kItems;
using tile_order::kLanes;
using tile_order::kRows;
using tile_order::kTile;
constexpr uint32_t kSelectThreads = tile_order::kThreads;

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

// What the first pass keeps of each element, summed over a thread's elements.
struct CollectTotals {
  uint32_t bad = 0;
  float largest = 0.0f;
};

// A thread's elements of one tile after the first pass's rule: the new e of each slot and which
// are listed (|v| > t).
struct CollectedItems {
  float kept[kItems];
  uint32_t flags = 0;
};

// The first pass's rule for the element in `slot` (in_range: its index < n): the new e (v, or the
// old residual r where v is not finite); counts a bad v, adds the kept |v| to tile_sum and flags
// the slot when |v| > t.
__device__ inline void collect_element(float g, float r, bool with_e, int slot, bool in_range,
                                       float t, CollectedItems& items, CollectTotals& totals,
                                       float& tile_sum) {
  const float v = rules::ef_value(g, with_e ? &r : nullptr);
  const bool finite = rules::finite(v);
  const float kept = with_e && !finite ? r : v;
  const float magnitude = in_range ? rules::kept_magnitude(kept) : 0.0f;
  totals.bad += in_range && !finite;
  totals.largest = fmaxf(totals.largest, magnitude);
  tile_sum += magnitude;
  items.kept[slot] = kept;
  items.flags |= static_cast<uint32_t>(in_range && finite && magnitude > t) << slot;
}

// One tile's inputs in tile_order's slots: g, and the residual when there is one (0 past n).
struct TileInputs {
  float g[kItems];
  float r[kItems];
};

// Where a thread's 16-byte access of `row` lies among a full tile's float4s.
__device__ inline uint32_t row_vector(int row) {
  return threadIdx.x + static_cast<uint32_t>(row) * kSelectThreads;
}

// Puts a row's g and residual, one float4 each, into their slots.
__device__ inline void unpack_row(int row, float4 gv, float4 ev, TileInputs& in) {
  const float gs[kLanes] = {gv.x, gv.y, gv.z, gv.w};
  const float es[kLanes] = {ev.x, ev.y, ev.z, ev.w};
#pragma unroll
  for (int lane = 0; lane < kLanes; ++lane) {
    in.g[row * kLanes + lane] = gs[lane];
    in.r[row * kLanes + lane] = es[lane];
  }
}

// Loads a tile's inputs, every load issued before any is used: 16-byte loads where `vectors` (a
// full tile of 16-byte aligned arrays), one float4 per row of the thread.
__device__ inline void load_inputs(const float* g, const float* e, uint64_t n, uint64_t first,
                                   bool vectors, TileInputs& in) {
  if (vectors) {
    const auto* g4 = reinterpret_cast<const float4*>(g + first);
    const auto* e4 = e ? reinterpret_cast<const float4*>(e + first) : nullptr;
#pragma unroll
    for (int row = 0; row < kRows; ++row) {
      unpack_row(row, g4[row_vector(row)], e4 ? e4[row_vector(row)] : float4{}, in);
    }
    return;
  }
#pragma unroll
  for (int slot = 0; slot < kItems; ++slot) {
    const uint64_t i = first + tile_order::item_offset(threadIdx.x, slot);
    in.g[slot] = i < n ? g[i] : 0.0f;
    in.r[slot] = i < n && e ? e[i] : 0.0f;
  }
}

// The first pass's rule over a tile's inputs.
__device__ inline void collect_inputs(const TileInputs& in, bool with_e, uint64_t n, uint64_t first,
                                      float t, CollectedItems& items, CollectTotals& totals,
                                      float& tile_sum) {
#pragma unroll
  for (int slot = 0; slot < kItems; ++slot) {
    const bool in_range = first + tile_order::item_offset(threadIdx.x, slot) < n;
    collect_element(in.g[slot], in.r[slot], with_e, slot, in_range, t, items, totals, tile_sum);
  }
}

// Writes a tile's new e: kept, or 0 in the slots set in `cleared`.
__device__ inline void store_residual(float* e, uint64_t n, uint64_t first, bool vectors,
                                      const CollectedItems& items, uint32_t cleared) {
  float out[kItems];
#pragma unroll
  for (int slot = 0; slot < kItems; ++slot) {
    out[slot] = (cleared >> slot) & 1u ? 0.0f : items.kept[slot];
  }
  if (vectors) {
    auto* e4 = reinterpret_cast<float4*>(e + first);
#pragma unroll
    for (int row = 0; row < kRows; ++row) {
      const float* o = out + row * kLanes;
      e4[row_vector(row)] = float4{o[0], o[1], o[2], o[3]};
    }
    return;
  }
#pragma unroll
  for (int slot = 0; slot < kItems; ++slot) {
    const uint64_t i = first + tile_order::item_offset(threadIdx.x, slot);
    if (i < n) e[i] = out[slot];
  }
}

// How the first pass reads a tile (FirstPass below chooses between the two vector ones).
enum class TileLoads {
  kScalar,   // 4-byte loads: arrays not 16-byte aligned
  kVectors,  // full tiles: 16-byte loads into registers, issued when the tile's turn comes
  kStaged,   // full tiles: copied into shared memory (cp.async) while the tile before is worked on
};

// A full tile's g and residual as the staged pass copies them, each thread's float4s at
// row_vector(row): a thread reads back only what it copied itself, so no barrier hands a stage
// from the copying threads to the reading ones.
struct TileStage {
  float4 g[kRows * kSelectThreads];
  float4 e[kRows * kSelectThreads];
};
constexpr int kStages = 2;  // the tile being worked on and the next one, in flight
constexpr size_t kStagedSharedBytes = kStages * sizeof(TileStage);

// Starts copying the tile at `first` into `stage` when it is full and commits a copy group either
// way, so that a block's group j is always its tile j.
__device__ inline void stage_tile(const float* g, const float* e, uint64_t n, uint64_t first,
                                  TileStage& stage) {
  if (first + kTile <= n) {
    const auto* g4 = reinterpret_cast<const float4*>(g + first);
    const auto* e4 = e ? reinterpret_cast<const float4*>(e + first) : nullptr;
#pragma unroll
    for (int row = 0; row < kRows; ++row) {
      __pipeline_memcpy_async(&stage.g[row_vector(row)], &g4[row_vector(row)], sizeof(float4));
      if (e4) {
        __pipeline_memcpy_async(&stage.e[row_vector(row)], &e4[row_vector(row)], sizeof(float4));
      }
    }
  }
  __pipeline_commit();
}

// Tiles grid-stride over a grid that the GPU holds at once; full tiles of aligned arrays take
// 16-byte accesses, staged through kStagedSharedBytes of dynamic shared memory with kStaged. Each
// tile's listed pairs go out in index order at the place that one atomic on the listed count
// gives the tile (recorded in `listed`); with clear_listed their e is 0. No tile waits on another.
// The statistics are reduced over the block's tiles and tallied once per block. Registers for
// three blocks per SM (at most 85); staged, the shared memory fits three on an H100 or H200
// (228 KiB per SM), two on an A100 (164 KiB).
template <TileLoads kLoads>
__global__ void __launch_bounds__(kSelectThreads, 3)
    collect_kernel(const float* g, float* e, uint64_t n, float t, bool clear_listed, PairList out,
                   ListedTiles listed, Tally* tally) {
  extern __shared__ TileStage stages[];  // kStages of them with kStaged, else none
  __shared__ TileScan::TempStorage scan;
  __shared__ uint32_t tile_start;
  __shared__ double warp_sums[kSelectThreads / 32];
  __shared__ uint32_t warp_bad[kSelectThreads / 32];
  __shared__ uint32_t warp_largest[kSelectThreads / 32];
  CollectTotals totals;
  double sum = 0.0;
  const uint64_t tiles = tile_order::tile_count(n);
  const auto vectors = [n](uint64_t first) {
    return kLoads != TileLoads::kScalar && first + kTile <= n;
  };
  const auto tile_first = [](uint64_t tile, int ahead) {
    return (tile + ahead * gridDim.x) * kTile;
  };
  if constexpr (kLoads == TileLoads::kStaged) {
    for (int ahead = 0; ahead < kStages - 1; ++ahead) {
      stage_tile(g, e, n, tile_first(blockIdx.x, ahead), stages[ahead]);
    }
  }
  int round = 0;  // of this block's tiles
  for (uint64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x, ++round) {
    const uint64_t first = tile * kTile;
    TileInputs inputs;
    if constexpr (kLoads == TileLoads::kStaged) {
      // The stage refilled here held the tile before this one, which this thread has read.
      stage_tile(g, e, n, tile_first(tile, kStages - 1), stages[(round + kStages - 1) % kStages]);
      __pipeline_wait_prior(kStages - 1);
      if (vectors(first)) {
        const TileStage& stage = stages[round % kStages];
#pragma unroll
        for (int row = 0; row < kRows; ++row) {
          unpack_row(row, stage.g[row_vector(row)], e ? stage.e[row_vector(row)] : float4{},
                     inputs);
        }
      } else {
        load_inputs(g, e, n, first, false, inputs);
      }
    } else {
      load_inputs(g, e, n, first, vectors(first), inputs);
    }
    CollectedItems items;
    float tile_sum = 0.0f;
    collect_inputs(inputs, e != nullptr, n, first, t, items, totals, tile_sum);
    sum += tile_sum;
    const TileRanks ranks(scan, items.flags);
    if (threadIdx.x == 0) {
      const uint32_t count = ranks.count();
      const auto start = count == 0
                             ? 0u
                             : static_cast<uint32_t>(atomicAdd(
                                   &tally->count[1], static_cast<unsigned long long>(count)));
      listed.first[tile] = start;
      listed.count[tile] = count;
      tile_start = start;  // written again after the next tile's scan, whose barriers follow
    }                      // every read of it below
    __syncthreads();
    const uint32_t stored =
        write_ranked(out, tile_start, ranks, items.flags, items.kept, [first](int slot) {
          return static_cast<uint32_t>(first + tile_order::item_offset(threadIdx.x, slot));
        });
    if (e) store_residual(e, n, first, vectors(first), items, clear_listed ? stored : 0u);
  }
  const uint32_t bad = __reduce_add_sync(kFullWarp, totals.bad);
  const uint32_t largest_bits = __reduce_max_sync(kFullWarp, float_bits(totals.largest));
  for (int lanes = 16; lanes > 0; lanes /= 2) sum += __shfl_xor_sync(kFullWarp, sum, lanes);
  if (threadIdx.x % 32 == 0) {
    warp_bad[threadIdx.x / 32] = bad;
    warp_largest[threadIdx.x / 32] = largest_bits;
    warp_sums[threadIdx.x / 32] = sum;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t block_bad = 0, block_largest = 0;
    double block_sum = 0.0;
    for (int w = 0; w < kSelectThreads / 32; ++w) {
      block_bad += warp_bad[w];
      block_largest = max(block_largest, warp_largest[w]);
      block_sum += warp_sums[w];
    }
    if (block_bad != 0) atomicAdd(&tally->count[0], static_cast<unsigned long long>(block_bad));
    if (block_largest != 0) atomicMax(&tally->max[0], block_largest);
    if (block_sum != 0.0) atomicAdd(&tally->sum, block_sum);
  }
}

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
Status check_listed_tiles(const ListedTiles& listed, uint64_t n) {
  if (tile_order::tile_count(n) <= listed.max_tiles) return {};
  return Status(ErrorCode::kInternal, "topk first pass over " + std::to_string(n) +
                                          " elements exceeds its tile records (" +
                                          std::to_string(listed.max_tiles) + " tiles)");
}

}  // namespace

Result<FirstPass> first_pass_from_environment() {
  const char* value = std::getenv(kFirstPassVariable);
  if (value == nullptr || value == std::string_view("registers")) return FirstPass::kRegisters;
  if (value == std::string_view("staged")) return FirstPass::kStaged;
  return Status(ErrorCode::kInvalidArgument,
                std::string(kFirstPassVariable) + "=" + value + ": expected registers or staged");
}

Status launch_topk_collect(const float* g, float* e, uint64_t n, float t, bool clear_listed,
                           const PairList& out, const ListedTiles& listed, Tally* tally,
                           cudaStream_t stream) {
  GRADGATE_RETURN_IF_ERROR(check_listed_tiles(listed, n));
  auto first_pass = first_pass_from_environment();
  if (!first_pass.ok()) return first_pass.status();
  const bool vectors = (reinterpret_cast<uintptr_t>(g) | reinterpret_cast<uintptr_t>(e)) % 16 == 0;
  const bool staged = vectors && *first_pass == FirstPass::kStaged;
  const auto kernel = !vectors ? collect_kernel<TileLoads::kScalar>
                      : staged ? collect_kernel<TileLoads::kStaged>
                               : collect_kernel<TileLoads::kVectors>;
  const size_t shared = staged ? kStagedSharedBytes : 0;
  // As many blocks as the GPU holds at once: no last partial wave, and each block's statistics
  // cost one atomic.
  auto blocks = resident_blocks(kernel, n, kTile, shared);
  if (!blocks.ok()) return blocks.status();
  kernel<<<*blocks, kSelectThreads, shared, stream>>>(g, e, n, t, clear_listed && e, out, listed,
                                                      tally);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

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
