// The selection kernels of topk (topk_launch.h): the fused first pass that collects candidates,
// the histograms and the cut of the radix select, and the sort of the selection by index.
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <map>
#include <utility>

#include "cuda_check.h"
#include "device_tally.cuh"
#include "gradgate/kernels/element_rules.h"
#include "topk_launch.h"

namespace gradgate::kernels::cuda {
namespace {

constexpr int kSelectThreads = 256;
constexpr int kCollectItems = 16;  // per thread: 16 loads of g and e in flight
constexpr uint32_t kCollectTile = kSelectThreads * kCollectItems;
constexpr int kPairItems = 16;  // per thread and round of the kernels over pairs: loads in flight
constexpr uint64_t kPairsPerRound = kSelectThreads * kPairItems;

// Appends (index, value) pairs to a PairList in no particular order, a warp at a time: each warp
// stages its pairs in shared memory and moves them out with one atomic per flush, so neither the
// block's other warps nor the next loads wait for the atomic. All 32 lanes of the warp call each
// member, in uniform control flow.
class WarpAppend {
 public:
  static constexpr uint32_t kPairs = 256;  // staged per warp
  struct Stage {
    uint32_t index[kPairs];
    float value[kPairs];
  };

  __device__ WarpAppend(Stage& stage, unsigned long long* counter, const PairList& out)
      : stage_(stage), counter_(counter), out_(out) {}

  __device__ void add(bool flag, uint32_t index, float value) {
    if (staged_ > kPairs - 32) flush();
    const unsigned flagged = __ballot_sync(kFullWarp, flag);
    if (flag) {
      const uint32_t at = staged_ + __popc(flagged & ((1u << lane()) - 1));
      stage_.index[at] = index;
      stage_.value[at] = value;
    }
    staged_ += __popc(flagged);
  }

  __device__ void flush() {
    if (staged_ == 0) return;
    __syncwarp();
    unsigned long long base = 0;
    if (lane() == 0) base = atomicAdd(counter_, static_cast<unsigned long long>(staged_));
    base = __shfl_sync(kFullWarp, base, 0);
    for (uint32_t p = lane(); p < staged_; p += 32) {
      if (base + p < out_.capacity) {
        out_.index[base + p] = stage_.index[p];
        out_.value[base + p] = stage_.value[p];
      }
    }
    __syncwarp();  // the stage is reused
    staged_ = 0;
  }

 private:
  __device__ static uint32_t lane() { return threadIdx.x % 32; }

  Stage& stage_;
  unsigned long long* counter_;
  PairList out_;
  uint32_t staged_ = 0;
};

// What the first pass keeps of each element, summed over a thread's elements.
struct CollectTotals {
  uint32_t bad = 0;
  float largest = 0.0f;
};

// The first pass's rule for element i (in_range: i < n): returns the new e (v, or the old residual
// r where v is not finite), counts a bad v, adds the kept |v| to tile_sum and appends (i, v) when
// |v| > t.
__device__ inline float collect_element(float g, float r, bool with_e, uint32_t i, bool in_range,
                                        float t, WarpAppend& append, CollectTotals& totals,
                                        float& tile_sum) {
  const float v = rules::ef_value(g, with_e ? &r : nullptr);
  const bool finite = rules::finite(v);
  const float kept = with_e && !finite ? r : v;
  const float magnitude = in_range ? rules::kept_magnitude(kept) : 0.0f;
  totals.bad += in_range && !finite;
  totals.largest = fmaxf(totals.largest, magnitude);
  tile_sum += magnitude;
  append.add(in_range && finite && magnitude > t, i, kept);
  return kept;
}

// A full tile with 16-byte loads and stores (g and e 16-byte aligned): thread t takes the float4s
// t, t + 256, ... of the tile, all its loads first.
__device__ inline void collect_full_tile(const float* g, float* e, uint64_t first, float t,
                                         WarpAppend& append, CollectTotals& totals,
                                         float& tile_sum) {
  constexpr int kVectors = kCollectItems / 4;
  const auto* g4 = reinterpret_cast<const float4*>(g + first);
  auto* e4 = e ? reinterpret_cast<float4*>(e + first) : nullptr;
  float4 loaded[kVectors], residual[kVectors];
#pragma unroll
  for (int j = 0; j < kVectors; ++j) {
    loaded[j] = g4[threadIdx.x + j * kSelectThreads];
    residual[j] = e4 ? e4[threadIdx.x + j * kSelectThreads] : float4{};
  }
#pragma unroll
  for (int j = 0; j < kVectors; ++j) {
    const auto i = static_cast<uint32_t>(first + 4 * (threadIdx.x + j * kSelectThreads));
    const bool with_e = e4 != nullptr;
    float4 kept;
    kept.x =
        collect_element(loaded[j].x, residual[j].x, with_e, i, true, t, append, totals, tile_sum);
    kept.y = collect_element(loaded[j].y, residual[j].y, with_e, i + 1, true, t, append, totals,
                             tile_sum);
    kept.z = collect_element(loaded[j].z, residual[j].z, with_e, i + 2, true, t, append, totals,
                             tile_sum);
    kept.w = collect_element(loaded[j].w, residual[j].w, with_e, i + 3, true, t, append, totals,
                             tile_sum);
    if (with_e) e4[threadIdx.x + j * kSelectThreads] = kept;
  }
}

// Any tile with 4-byte accesses: thread t takes elements t, t + 256, ..., all its loads first.
__device__ inline void collect_tile(const float* g, float* e, uint64_t n, uint64_t first, float t,
                                    WarpAppend& append, CollectTotals& totals, float& tile_sum) {
  float loaded[kCollectItems], residual[kCollectItems];
#pragma unroll
  for (int j = 0; j < kCollectItems; ++j) {
    const uint64_t i = first + threadIdx.x + static_cast<uint64_t>(j) * kSelectThreads;
    loaded[j] = i < n ? g[i] : 0.0f;
    residual[j] = i < n && e ? e[i] : 0.0f;
  }
#pragma unroll
  for (int j = 0; j < kCollectItems; ++j) {
    const uint64_t i = first + threadIdx.x + static_cast<uint64_t>(j) * kSelectThreads;
    const float kept =
        collect_element(loaded[j], residual[j], e != nullptr, static_cast<uint32_t>(i), i < n, t,
                        append, totals, tile_sum);
    if (i < n && e) e[i] = kept;
  }
}

// Tiles of kCollectTile elements, grid-stride over a grid that the GPU holds at once; full tiles
// of aligned arrays (kVectors) take 16-byte accesses. The statistics are reduced over the block's
// tiles and tallied once per block.
template <bool kVectors>
__global__ void __launch_bounds__(kSelectThreads)
    collect_kernel(const float* g, float* e, uint64_t n, float t, PairList out, Tally* tally) {
  __shared__ WarpAppend::Stage stages[kSelectThreads / 32];
  __shared__ double warp_sums[kSelectThreads / 32];
  __shared__ uint32_t warp_bad[kSelectThreads / 32];
  __shared__ uint32_t warp_largest[kSelectThreads / 32];
  WarpAppend append(stages[threadIdx.x / 32], &tally->count[1], out);
  CollectTotals totals;
  double sum = 0.0;
  const uint64_t tiles = (n + kCollectTile - 1) / kCollectTile;
  for (uint64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const uint64_t first = tile * kCollectTile;
    float tile_sum = 0.0f;
    if (kVectors && first + kCollectTile <= n) {
      collect_full_tile(g, e, first, t, append, totals, tile_sum);
    } else {
      collect_tile(g, e, n, first, t, append, totals, tile_sum);
    }
    sum += tile_sum;
  }
  append.flush();
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

// The pairs of a round of a kernel over pairs: this thread's kPairItems pairs from `base` on, its
// j-th at base + j * kSelectThreads + threadIdx.x (index and value 0 past the end), all loaded
// before any is used.
__device__ inline void load_round(const PairSource& source, uint64_t base,
                                  uint32_t (&index)[kPairItems], float (&value)[kPairItems]) {
#pragma unroll
  for (int j = 0; j < kPairItems; ++j) {
    const uint64_t p = base + static_cast<uint64_t>(j) * kSelectThreads + threadIdx.x;
    index[j] = p < source.count ? source_index(source, p) : 0;
    value[j] = p < source.count ? source.value[p] : 0.0f;
  }
}

__device__ inline bool in_round(const PairSource& source, uint64_t base, int j) {
  return base + static_cast<uint64_t>(j) * kSelectThreads + threadIdx.x < source.count;
}

// The rounds of a block: grid-stride in rounds of kPairsPerRound pairs.
__device__ inline uint64_t first_round() { return blockIdx.x * kPairsPerRound; }
__device__ inline uint64_t round_stride() { return gridDim.x * kPairsPerRound; }

// Calls visit(index, value) for every pair of `source`.
template <typename Visit>
__device__ inline void for_each_pair(const PairSource& source, Visit visit) {
  for (uint64_t base = first_round(); base < source.count; base += round_stride()) {
    uint32_t index[kPairItems];
    float value[kPairItems];
    load_round(source, base, index, value);
#pragma unroll
    for (int j = 0; j < kPairItems; ++j) {
      if (in_round(source, base, j)) visit(index[j], value[j]);
    }
  }
}

__global__ void __launch_bounds__(kSelectThreads)
    histogram_kernel(PairSource source, topk::KeyRange range, uint32_t* bins) {
  __shared__ uint32_t local[topk::kSelectBins];
  for (uint32_t b = threadIdx.x; b < topk::kSelectBins; b += kSelectThreads) local[b] = 0;
  __syncthreads();
  for_each_pair(source, [&](uint32_t index, float value) {
    const uint64_t key = topk::order_key(value, index);
    if (range.holds(key)) atomicAdd(&local[range.bin(key)], 1u);
  });
  __syncthreads();
  for (uint32_t b = threadIdx.x; b < topk::kSelectBins; b += kSelectThreads) {
    if (local[b] != 0) atomicAdd(&bins[b], local[b]);
  }
}

// Appends the flagged pairs of a block's threads to a PairList with one atomic per block call,
// in no particular order. All threads of the block call it.
template <int kItems>
struct BlockAppend {
  using Scan = cub::BlockScan<uint32_t, kSelectThreads>;
  struct Storage {
    typename Scan::TempStorage scan;
    unsigned long long base;
  };

  __device__ static void run(Storage& storage, const bool (&flag)[kItems],
                             const uint32_t (&index)[kItems], const float (&value)[kItems],
                             unsigned long long* counter, const PairList& out) {
    uint32_t mine = 0;
#pragma unroll
    for (int j = 0; j < kItems; ++j) mine += flag[j];
    uint32_t offset = 0, total = 0;
    Scan(storage.scan).ExclusiveSum(mine, offset, total);
    if (threadIdx.x == 0) {
      storage.base = total ? atomicAdd(counter, static_cast<unsigned long long>(total)) : 0;
    }
    __syncthreads();
    uint64_t position = storage.base + offset;
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      if (!flag[j]) continue;
      if (position < out.capacity) {
        out.index[position] = index[j];
        out.value[position] = value[j];
      }
      ++position;
    }
    __syncthreads();  // the storage is reused
  }
};

// Appends the pairs at or above the cut: a round of kPairItems pairs per thread, one atomic per
// block and round.
__global__ void __launch_bounds__(kSelectThreads)
    keep_kernel(PairSource source, uint64_t cut, PairList out, Tally* tally) {
  __shared__ typename BlockAppend<kPairItems>::Storage append;
  for (uint64_t base = first_round(); base < source.count; base += round_stride()) {
    uint32_t index[kPairItems];
    float value[kPairItems];
    load_round(source, base, index, value);
    bool keep[kPairItems];
#pragma unroll
    for (int j = 0; j < kPairItems; ++j) {
      keep[j] = in_round(source, base, j) && topk::order_key(value[j], index[j]) >= cut;
    }
    BlockAppend<kPairItems>::run(append, keep, index, value, &tally->count[2], out);
  }
}

// The blocks of `kernel` (kSelectThreads threads each) that the current GPU holds at once: asked
// of the runtime on the thread's first launch per kernel and GPU, then remembered (per thread, as
// Scratch::current keeps its scratch).
template <typename Kernel>
Result<uint64_t> resident_blocks_of(Kernel kernel) {
  thread_local std::map<std::pair<const void*, int>, uint64_t> known;
  int device = 0;
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  const auto key = std::make_pair(reinterpret_cast<const void*>(kernel), device);
  if (const auto it = known.find(key); it != known.end()) return it->second;
  int multiprocessors = 0, per_multiprocessor = 0;
  GRADGATE_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &per_multiprocessor, kernel, kSelectThreads, 0));
  const auto resident = static_cast<uint64_t>(std::max(multiprocessors * per_multiprocessor, 1));
  known.emplace(key, resident);
  return resident;
}

// Blocks for a kernel over `count` items, `per_block` a round: at most what the GPU holds at once.
template <typename Kernel>
Result<unsigned> resident_blocks(Kernel kernel, uint64_t count, uint64_t per_block) {
  auto resident = resident_blocks_of(kernel);
  if (!resident.ok()) return resident.status();
  const uint64_t needed = std::max<uint64_t>((count + per_block - 1) / per_block, 1);
  return static_cast<unsigned>(std::min(needed, *resident));
}

}  // namespace

Status launch_topk_collect(const float* g, float* e, uint64_t n, float t, const PairList& out,
                           Tally* tally, cudaStream_t stream) {
  const bool vectors = (reinterpret_cast<uintptr_t>(g) | reinterpret_cast<uintptr_t>(e)) % 16 == 0;
  const auto kernel = vectors ? collect_kernel<true> : collect_kernel<false>;
  // As many blocks as the GPU holds at once: no last partial wave, and each block's statistics
  // cost one atomic.
  auto blocks = resident_blocks(kernel, n, kCollectTile);
  if (!blocks.ok()) return blocks.status();
  kernel<<<*blocks, kSelectThreads, 0, stream>>>(g, e, n, t, out, tally);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

Status launch_topk_histogram(const PairSource& source, const topk::KeyRange& range, uint32_t* bins,
                             cudaStream_t stream) {
  GRADGATE_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(bins, 0, topk::kSelectBins * sizeof(uint32_t), stream));
  if (source.count == 0) return {};
  // Each block adds its non-zero bins with one atomic each: no more blocks than run at once.
  auto blocks = resident_blocks(histogram_kernel, source.count, kPairsPerRound);
  if (!blocks.ok()) return blocks.status();
  histogram_kernel<<<*blocks, kSelectThreads, 0, stream>>>(source, range, bins);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

Status launch_topk_keep(const PairSource& source, uint64_t cut, const PairList& out, Tally* tally,
                        cudaStream_t stream) {
  if (source.count == 0) return {};
  auto blocks = resident_blocks(keep_kernel, source.count, kPairsPerRound);
  if (!blocks.ok()) return blocks.status();
  keep_kernel<<<*blocks, kSelectThreads, 0, stream>>>(source, cut, out, tally);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

Result<size_t> topk_temp_bytes(uint64_t count) {
  size_t sort_bytes = 0, scan_bytes = 0;
  cub::DoubleBuffer<uint32_t> keys(nullptr, nullptr);
  cub::DoubleBuffer<float> values(nullptr, nullptr);
  GRADGATE_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(
      nullptr, sort_bytes, keys, values, static_cast<int64_t>(count), 0, 32));
  GRADGATE_CUDA_RETURN_IF_ERROR(cub::DeviceScan::ExclusiveSum(
      nullptr, scan_bytes, static_cast<uint64_t*>(nullptr), static_cast<int64_t>(count + 1)));
  return std::max(sort_bytes, scan_bytes);
}

Result<int> launch_topk_sort(uint32_t* const index[2], float* const value[2], uint64_t count,
                             int index_bits, void* temp, size_t temp_bytes, cudaStream_t stream) {
  if (count < 2) return 0;
  cub::DoubleBuffer<uint32_t> keys(index[0], index[1]);
  cub::DoubleBuffer<float> values(value[0], value[1]);
  GRADGATE_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(
      temp, temp_bytes, keys, values, static_cast<int64_t>(count), 0, index_bits, stream));
  return keys.selector;
}

}  // namespace gradgate::kernels::cuda
