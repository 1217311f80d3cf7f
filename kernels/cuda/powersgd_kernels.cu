// powersgd: the matrix M = grad + residual, payloads with their checksum, the orthonormalisation
// of P and the unit-norm Q (one thread block per matrix or column, see powersgd_math.h), and the
// low-rank product P Q^T applied to a residual or an accumulator.
#include "cuda_check.h"
#include "device_tally.cuh"
#include "gradgate/kernels/element_rules.h"
#include "gradgate/kernels/half.h"
#include "powersgd_launch.h"
#include "powersgd_math.h"
#include "tile_crc.cuh"

namespace gradgate::kernels::cuda {
namespace {

using Stage = TileStage<32>;
constexpr uint32_t kTileWords = Stage::kTileBytes / sizeof(uint32_t);

constexpr int kTeamThreads = 512;    // the block that orthonormalises P
constexpr int kColumnThreads = 256;  // a block that normalises one column of Q

constexpr uint32_t kBlockSide = 64;  // the low-rank product: a 64 x 64 block of the output
constexpr uint32_t kCellSide = 4;    // per thread: 4 x 4 outputs, 16 apart
constexpr uint32_t kThreadsPerSide = kBlockSide / kCellSide;
constexpr int kProductThreads = kThreadsPerSide * kThreadsPerSide;

/// A thread block as the Team of powersgd_math.h: sums in a fixed order (a butterfly in each
/// warp, lane 0's total, then the warps in turn), so a block gives the same bits every run.
template <int kThreads>
struct BlockTeam {
  static_assert(kThreads % 32 == 0, "whole warps");
  double* warp_sums;  // kThreads / 32, shared
  double* total;      // shared

  __device__ uint32_t rank() const { return threadIdx.x; }
  __device__ uint32_t size() const { return kThreads; }
  __device__ double sum(double part) {
    for (int lanes = 16; lanes > 0; lanes /= 2) part += __shfl_xor_sync(kFullWarp, part, lanes);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = part;
    __syncthreads();
    if (threadIdx.x == 0) {
      double sum = 0.0;
      for (int w = 0; w < kThreads / 32; ++w) sum += warp_sums[w];
      *total = sum;
    }
    __syncthreads();
    return *total;
  }
};

__global__ void matrix_kernel(const float* g, const float* e, float* m, uint64_t n, uint64_t padded,
                              Tally* tally) {
  uint32_t bad = 0;
  for (uint64_t i = grid_first(); i < padded; i += grid_stride()) {
    float v = 0.0f;
    if (i < n) {
      const float gi = g[i];
      bad += !rules::finite(gi);
      v = rules::ef_value(gi, e ? e + i : nullptr);
    }
    m[i] = v;
  }
  tally_count(&tally->count[0], bad);
}

// Payload word w of `words`: rows, cols, then the values a (+ b), staged for the CRC.
__global__ void __launch_bounds__(kTileThreads)
    payload_kernel(const float* a, const float* b, uint32_t* payload, uint32_t rows, uint32_t cols,
                   uint64_t words, CrcSink sink, unsigned long long* bad_count) {
  __shared__ Stage stage;
  stage.init_table();
  const TileSpan tile = tile_span(words, kTileWords);
  uint32_t bad = 0;
  for (uint32_t j = threadIdx.x; j < tile.count; j += kTileThreads) {
    const uint64_t w = tile.first + j;
    uint32_t word = w == 0 ? rows : cols;
    if (w >= 2) {
      float v = a[w - 2];
      if (b) v += b[w - 2];
      bad += !rules::finite(v);
      word = float_bits(v);
    }
    payload[w] = word;
    stage.put(j * 4, word);
  }
  stage.fold_crc(tile.first * 4, tile.count * 4, sink);
  tally_count(bad_count, bad);
}

__global__ void __launch_bounds__(kTeamThreads)
    orthonormalise_kernel(const float* p, uint64_t rows, uint32_t rank, double* w, float* p_hat) {
  __shared__ double warp_sums[kTeamThreads / 32];
  __shared__ double total;
  BlockTeam<kTeamThreads> team{warp_sums, &total};
  powersgd::orthonormalise(team, p, rows, rank, w, p_hat);
}

__global__ void __launch_bounds__(kColumnThreads)
    normalise_q_kernel(float* q, uint64_t cols, uint32_t rank, uint64_t key, bool redraw) {
  __shared__ double warp_sums[kColumnThreads / 32];
  __shared__ double total;
  BlockTeam<kColumnThreads> team{warp_sums, &total};
  powersgd::normalise_column(team, q, cols, rank, blockIdx.x, key, redraw);
}

// One 64 x 64 block of out = base -/+ P Q^T: the block's rows of P and columns of Q^T are staged
// in shared memory (k-major), and each thread sums rank products for its 4 x 4 outputs.
__global__ void __launch_bounds__(kProductThreads)
    low_rank_kernel(const float* p, const float* q, uint64_t rows, uint64_t cols, uint32_t rank,
                    const float* base, float* out, uint64_t n, bool subtract,
                    const Tally* skip_if_bad) {
  if (skip_if_bad && (skip_if_bad->count[0] | skip_if_bad->count[1]) != 0) return;
  __shared__ float p_block[powersgd::kMaxRank * kBlockSide];  // [k][row in block]
  __shared__ float q_block[powersgd::kMaxRank * kBlockSide];  // [k][col in block]
  const uint64_t col_blocks = (cols + kBlockSide - 1) / kBlockSide;
  const uint64_t row0 = blockIdx.x / col_blocks * kBlockSide;
  const uint64_t col0 = blockIdx.x % col_blocks * kBlockSide;
  for (uint32_t t = threadIdx.x; t < kBlockSide * rank; t += kProductThreads) {
    const uint32_t i = t / rank, k = t % rank;
    p_block[k * kBlockSide + i] = row0 + i < rows ? p[(row0 + i) * rank + k] : 0.0f;
    q_block[k * kBlockSide + i] = col0 + i < cols ? q[(col0 + i) * rank + k] : 0.0f;
  }
  __syncthreads();
  const uint32_t tx = threadIdx.x % kThreadsPerSide, ty = threadIdx.x / kThreadsPerSide;
  float sum[kCellSide][kCellSide] = {};
  for (uint32_t k = 0; k < rank; ++k) {
    float pk[kCellSide], qk[kCellSide];
#pragma unroll
    for (uint32_t a = 0; a < kCellSide; ++a) {
      pk[a] = p_block[k * kBlockSide + ty + kThreadsPerSide * a];
      qk[a] = q_block[k * kBlockSide + tx + kThreadsPerSide * a];
    }
#pragma unroll
    for (uint32_t a = 0; a < kCellSide; ++a) {
#pragma unroll
      for (uint32_t c = 0; c < kCellSide; ++c) sum[a][c] += pk[a] * qk[c];
    }
  }
#pragma unroll
  for (uint32_t a = 0; a < kCellSide; ++a) {
    const uint64_t row = row0 + ty + kThreadsPerSide * a;
#pragma unroll
    for (uint32_t c = 0; c < kCellSide; ++c) {
      const uint64_t col = col0 + tx + kThreadsPerSide * c;
      const uint64_t i = row * cols + col;
      if (row >= rows || col >= cols || i >= n) continue;
      const float before = base ? base[i] : 0.0f;
      out[i] = subtract ? before - sum[a][c] : before + sum[a][c];
    }
  }
}

}  // namespace

Status launch_powersgd_matrix(const float* g, const float* e, float* m, uint64_t n, uint64_t padded,
                              Tally* tally, cudaStream_t stream) {
  matrix_kernel<<<element_blocks(padded), kElementThreads, 0, stream>>>(g, e, m, n, padded, tally);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

Status launch_powersgd_payload(const float* a, const float* b, uint32_t* payload, uint32_t rows,
                               uint32_t cols, uint64_t values, const CrcSink& sink,
                               unsigned long long* bad, cudaStream_t stream) {
  const uint64_t words = 2 + values;
  payload_kernel<<<tile_blocks(words, kTileWords), kTileThreads, 0, stream>>>(
      a, b, payload, rows, cols, words, sink, bad);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

Status launch_powersgd_orthonormalise(const float* p, uint64_t rows, uint32_t rank, double* w,
                                      float* p_hat, cudaStream_t stream) {
  orthonormalise_kernel<<<1, kTeamThreads, 0, stream>>>(p, rows, rank, w, p_hat);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

Status launch_powersgd_normalise_q(float* q, uint64_t cols, uint32_t rank, uint64_t key,
                                   bool redraw, cudaStream_t stream) {
  normalise_q_kernel<<<rank, kColumnThreads, 0, stream>>>(q, cols, rank, key, redraw);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

Status launch_powersgd_low_rank(const float* p, const float* q, uint64_t rows, uint64_t cols,
                                uint32_t rank, const float* base, float* out, uint64_t n,
                                bool subtract, const Tally* skip_if_bad, cudaStream_t stream) {
  if (rank == 0 || rank > powersgd::kMaxRank) {
    return Status(ErrorCode::kInternal, "powersgd ranks are 1 to 64");
  }
  const uint64_t blocks =
      ((rows + kBlockSide - 1) / kBlockSide) * ((cols + kBlockSide - 1) / kBlockSide);
  low_rank_kernel<<<static_cast<unsigned>(blocks), kProductThreads, 0, stream>>>(
      p, q, rows, cols, rank, base, out, n, subtract, skip_if_bad);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

}  // namespace gradgate::kernels::cuda
