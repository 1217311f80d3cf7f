// The selection kernels of topk (topk_launch.h): the fused first pass that collects candidates,
// the histograms and the cut of the radix select, and the sort of the selection by index.
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>

#include "cuda_check.h"
#include "device_tally.cuh"
#include "gradgate/kernels/element_rules.h"
#include "topk_launch.h"

namespace gradgate::kernels::cuda {
namespace {

constexpr int kSelectThreads = 256;
constexpr int kCollectItems = 16;  // per thread: 16 loads of g and e in flight
constexpr uint32_t kCollectTile = kSelectThreads * kCollectItems;
constexpr int kKeepItems = 4;
constexpr unsigned kMaxSelectBlocks = 1024;
constexpr uint64_t kMaxCollectBlocks = 2048;  // a few waves: tallies stay one atomic per block

// Appends the flagged items of a block's threads to a PairList with one atomic per block, in no
// particular order. All threads of the block call it.
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

// Tiles of kCollectTile elements, grid-stride, thread t taking elements t, t + 256, ... of a
// tile. The statistics are reduced over the block's tiles and tallied once per block.
__global__ void __launch_bounds__(kSelectThreads)
    collect_kernel(const float* g, float* e, uint64_t n, float t, PairList out, Tally* tally) {
  __shared__ typename BlockAppend<kCollectItems>::Storage append;
  __shared__ double warp_sums[kSelectThreads / 32];
  __shared__ uint32_t warp_bad[kSelectThreads / 32];
  __shared__ uint32_t warp_largest[kSelectThreads / 32];
  uint32_t bad = 0;
  float largest = 0.0f;
  double sum = 0.0;
  const uint64_t tiles = (n + kCollectTile - 1) / kCollectTile;
  for (uint64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const uint64_t first = tile * kCollectTile + threadIdx.x;
    float loaded[kCollectItems], residual[kCollectItems];
#pragma unroll
    for (int j = 0; j < kCollectItems; ++j) {
      const uint64_t i = first + static_cast<uint64_t>(j) * kSelectThreads;
      loaded[j] = i < n ? g[i] : 0.0f;
      residual[j] = i < n && e ? e[i] : 0.0f;
    }
    bool flag[kCollectItems];
    uint32_t index[kCollectItems];
    float value[kCollectItems];
    float tile_sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kCollectItems; ++j) {
      const uint64_t i = first + static_cast<uint64_t>(j) * kSelectThreads;
      const float v = rules::ef_value(loaded[j], e ? &residual[j] : nullptr);
      const bool finite = rules::finite(v);
      const float kept = e && !finite ? residual[j] : v;
      if (i < n && e) e[i] = kept;
      const float magnitude = i < n ? rules::kept_magnitude(kept) : 0.0f;
      bad += i < n && !finite;
      largest = fmaxf(largest, magnitude);
      tile_sum += magnitude;
      flag[j] = i < n && finite && magnitude > t;
      index[j] = static_cast<uint32_t>(i);
      value[j] = kept;
    }
    sum += tile_sum;
    BlockAppend<kCollectItems>::run(append, flag, index, value, &tally->count[1], out);
  }
  bad = __reduce_add_sync(kFullWarp, bad);
  const uint32_t largest_bits = __reduce_max_sync(kFullWarp, float_bits(largest));
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

__global__ void __launch_bounds__(kSelectThreads)
    histogram_kernel(PairSource source, topk::KeyRange range, uint32_t* bins) {
  __shared__ uint32_t local[topk::kSelectBins];
  for (uint32_t b = threadIdx.x; b < topk::kSelectBins; b += kSelectThreads) local[b] = 0;
  __syncthreads();
  for (uint64_t j = grid_first(); j < source.count; j += grid_stride()) {
    const uint64_t key = topk::order_key(source.value[j], source_index(source, j));
    if (range.holds(key)) atomicAdd(&local[range.bin(key)], 1u);
  }
  __syncthreads();
  for (uint32_t b = threadIdx.x; b < topk::kSelectBins; b += kSelectThreads) {
    if (local[b] != 0) atomicAdd(&bins[b], local[b]);
  }
}

__global__ void __launch_bounds__(kSelectThreads)
    keep_kernel(PairSource source, uint64_t cut, PairList out, Tally* tally) {
  __shared__ typename BlockAppend<kKeepItems>::Storage append;
  constexpr uint64_t kPerBlock = kSelectThreads * kKeepItems;
  for (uint64_t base = blockIdx.x * kPerBlock; base < source.count;
       base += static_cast<uint64_t>(gridDim.x) * kPerBlock) {
    bool flag[kKeepItems];
    uint32_t index[kKeepItems];
    float value[kKeepItems];
#pragma unroll
    for (int j = 0; j < kKeepItems; ++j) {
      const uint64_t p = base + static_cast<uint64_t>(j) * kSelectThreads + threadIdx.x;
      flag[j] = p < source.count;
      index[j] = flag[j] ? source_index(source, p) : 0;
      value[j] = flag[j] ? source.value[p] : 0.0f;
      flag[j] = flag[j] && topk::order_key(value[j], index[j]) >= cut;
    }
    BlockAppend<kKeepItems>::run(append, flag, index, value, &tally->count[2], out);
  }
}

unsigned select_blocks(uint64_t count, uint64_t per_block) {
  const uint64_t blocks = (count + per_block - 1) / per_block;
  return static_cast<unsigned>(std::min<uint64_t>(std::max<uint64_t>(blocks, 1), kMaxSelectBlocks));
}

}  // namespace

Status launch_topk_collect(const float* g, float* e, uint64_t n, float t, const PairList& out,
                           Tally* tally, cudaStream_t stream) {
  const uint64_t tiles = (n + kCollectTile - 1) / kCollectTile;
  const auto blocks = static_cast<unsigned>(std::min<uint64_t>(tiles, kMaxCollectBlocks));
  collect_kernel<<<blocks, kSelectThreads, 0, stream>>>(g, e, n, t, out, tally);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

Status launch_topk_histogram(const PairSource& source, const topk::KeyRange& range, uint32_t* bins,
                             cudaStream_t stream) {
  GRADGATE_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(bins, 0, topk::kSelectBins * sizeof(uint32_t), stream));
  if (source.count == 0) return {};
  histogram_kernel<<<select_blocks(source.count, kSelectThreads * 16), kSelectThreads, 0, stream>>>(
      source, range, bins);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

Status launch_topk_keep(const PairSource& source, uint64_t cut, const PairList& out, Tally* tally,
                        cudaStream_t stream) {
  if (source.count == 0) return {};
  keep_kernel<<<select_blocks(source.count, kSelectThreads * kKeepItems), kSelectThreads, 0,
                stream>>>(source, cut, out, tally);
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
