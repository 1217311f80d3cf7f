// The first pass of topk's selection (topk_launch.h): e += g and the candidates above a threshold,
// fused. Each tile ranks its candidates in index order (tile_order.h) and takes its place in the
// list with one atomic, never waiting on another tile; keep (topk_select_kernels.cu) then puts
// the kept candidates in index order from the tiles' counts, so the selection needs no sort.
#include <cuda_pipeline.h>

#include "device_tally.cuh"
#include "gradgate/kernels/element_rules.h"
#include "topk_select.cuh"

namespace gradgate::kernels::cuda {
namespace {

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

// How the first pass reads a tile (the spec's first_pass chooses between the two vector ones).
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

// Reduces the first pass's statistics over the block and tallies them, one atomic each per block.
// All threads of the block call it.
__device__ inline void tally_block(const CollectTotals& totals, double sum, Tally* tally) {
  __shared__ double warp_sums[kSelectThreads / 32];
  __shared__ uint32_t warp_bad[kSelectThreads / 32];
  __shared__ uint32_t warp_largest[kSelectThreads / 32];
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
  tally_block(totals, sum, tally);
}

}  // namespace

Status launch_topk_collect(const float* g, float* e, uint64_t n, float t, bool clear_listed,
                           const PairList& out, const ListedTiles& listed, TopkFirstPass first_pass,
                           Tally* tally, cudaStream_t stream) {
  GRADGATE_RETURN_IF_ERROR(check_listed_tiles(listed, n));
  const bool vectors = (reinterpret_cast<uintptr_t>(g) | reinterpret_cast<uintptr_t>(e)) % 16 == 0;
  const bool staged = vectors && first_pass == TopkFirstPass::kStaged;
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

}  // namespace gradgate::kernels::cuda
