// |v| statistics (qsgd's local scale, sign's scale) and the sign encode and decode.
#include "cuda_check.h"
#include "device_tally.cuh"
#include "gradgate/kernels/element_rules.h"
#include "launch.h"
#include "tile_crc.cuh"

namespace gradgate::kernels::cuda {
namespace {

constexpr uint32_t kStatsThreads = 256;
constexpr uint32_t kSumBlock = rules::kSumBlock;
constexpr uint32_t kSumLanes = rules::kSumLanes;

// One block per kSumBlock elements: the count of bad v and the largest kept |v|; with
// `block_sums`, also the block's ordered sum (lanes summed in float, added in order into a double)
// over its elements below n & ~7.
__global__ void __launch_bounds__(kStatsThreads)
    abs_stats_kernel(const float* g, const float* e, uint64_t n, double* block_sums, Tally* tally) {
  __shared__ float kept[kSumBlock];
  __shared__ float lane_sums[kSumLanes];
  const uint64_t first = static_cast<uint64_t>(blockIdx.x) * kSumBlock;
  const uint32_t count = static_cast<uint32_t>(n - first < kSumBlock ? n - first : kSumBlock);
  uint32_t bad = 0;
  float largest = 0.0f;
  for (uint32_t j = threadIdx.x; j < count; j += kStatsThreads) {
    const uint64_t i = first + j;
    const float v = rules::ef_value(g[i], e ? e + i : nullptr);
    const float magnitude = rules::kept_magnitude(v);
    bad += !rules::finite(v);
    largest = fmaxf(largest, magnitude);
    kept[j] = magnitude;
  }
  tally_count(&tally->count[0], bad);
  tally_max(&tally->max[0], float_bits(largest));
  if (!block_sums) return;
  const uint64_t whole = n & ~uint64_t{7};
  const uint32_t summed =
      first < whole ? static_cast<uint32_t>(min(whole - first, uint64_t{count})) : 0;
  __syncthreads();
  if (threadIdx.x < kSumLanes) {
    float lane = 0.0f;
    for (uint32_t j = threadIdx.x; j < summed; j += kSumLanes) lane += kept[j];
    lane_sums[threadIdx.x] = lane;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double block = 0.0;
    for (float lane : lane_sums) block += lane;
    block_sums[blockIdx.x] = block;
  }
}

// One thread: the blocks' sums in order, then the last n % 8 elements one by one.
__global__ void abs_sum_kernel(const double* block_sums, uint64_t blocks, const float* g,
                               const float* e, uint64_t n, Tally* tally) {
  double sum = 0.0;
#pragma unroll 8
  for (uint64_t b = 0; b < blocks; ++b) sum += block_sums[b];
  for (uint64_t i = n & ~uint64_t{7}; i < n; ++i) {
    sum += rules::kept_magnitude(rules::ef_value(g[i], e ? e + i : nullptr));
  }
  tally->sum = sum;
}

using SignStage = TileStage<4>;
constexpr uint32_t kSignTileElements = SignStage::kTileBytes * 8;

// A warp turns 32 elements into one little-endian word of the bitmap (lane k is bit k).
__global__ void __launch_bounds__(kTileThreads)
    sign_encode_kernel(const float* g, float* e, uint8_t* bits, uint64_t n, float scale,
                       CrcSink sink) {
  __shared__ SignStage stage;
  stage.init_table();
  const TileSpan tile = tile_span(n, kSignTileElements);
  const uint64_t tile_offset = tile.first / 8;
  const uint32_t tile_bytes = (tile.count + 7) / 8;
  const uint32_t lane = threadIdx.x % 32;
  for (uint32_t word = threadIdx.x / 32; word * 32 < tile.count; word += kTileThreads / 32) {
    const uint32_t j = word * 32 + lane;
    bool bit = false;
    if (j < tile.count) {
      const uint64_t i = tile.first + j;
      const float residual = e ? e[i] : 0.0f;
      const float v = rules::ef_value(g[i], e ? &residual : nullptr);
      bit = rules::sign_bit(v);
      if (e) e[i] = rules::residual_after(v, rules::sign_value(bit, scale), residual);
    }
    const uint32_t value = __ballot_sync(kFullWarp, bit);
    if (lane == 0) {
      stage.put(word * 4, value);
      const uint32_t offset = word * 4;
      uint8_t* at = bits + tile_offset + offset;
      if (offset + 4 <= tile_bytes) {
        *reinterpret_cast<uint32_t*>(at) = value;
      } else {
        for (uint32_t b = 0; offset + b < tile_bytes; ++b)
          at[b] = static_cast<uint8_t>(value >> (8 * b));
      }
    }
  }
  stage.fold_crc(tile_offset, tile_bytes, sink);
}

__global__ void sign_decode_kernel(const uint8_t* bits, const float* scale, float* out, uint64_t n,
                                   bool overwrite) {
  const float s = *scale;
  for (uint64_t i = grid_first(); i < n; i += grid_stride()) {
    const bool bit = (bits[i / 8] >> (i % 8)) & 1u;
    out[i] = (overwrite ? 0.0f : out[i]) + rules::sign_value(bit, s);
  }
}

}  // namespace

Status launch_abs_stats(const float* g, const float* e, uint64_t n, double* block_sums,
                        Tally* tally, cudaStream_t stream) {
  const uint64_t blocks = (n + kSumBlock - 1) / kSumBlock;
  abs_stats_kernel<<<static_cast<unsigned>(blocks), kStatsThreads, 0, stream>>>(g, e, n, block_sums,
                                                                                tally);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  if (block_sums) {
    abs_sum_kernel<<<1, 1, 0, stream>>>(block_sums, blocks, g, e, n, tally);
    GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  return {};
}

Status launch_sign_encode(const float* g, float* e, uint8_t* bits, uint64_t n, float scale,
                          const CrcSink& sink, cudaStream_t stream) {
  sign_encode_kernel<<<tile_blocks(n, kSignTileElements), kTileThreads, 0, stream>>>(g, e, bits, n,
                                                                                     scale, sink);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

Status launch_sign_decode(const uint8_t* bits, const float* scale, float* out, uint64_t n,
                          bool overwrite, cudaStream_t stream) {
  sign_decode_kernel<<<element_blocks(n), kElementThreads, 0, stream>>>(bits, scale, out, n,
                                                                        overwrite);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

}  // namespace gradgate::kernels::cuda
