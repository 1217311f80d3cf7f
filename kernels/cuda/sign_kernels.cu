// |v| statistics (qsgd's local scale, sign's scale) and the sign encode and decode.
#include <algorithm>
#include <cstdint>

#include "cuda_check.h"
#include "device_tally.cuh"
#include "gradgate/kernels/element_rules.h"
#include "launch.h"
#include "tile_crc.cuh"

namespace gradgate::kernels::cuda {
namespace {

constexpr uint32_t kSumBlock = rules::kSumBlock;
constexpr uint32_t kSumLanes = rules::kSumLanes;

// The |v| statistics read g (and e) four elements at a time: one 16-byte load each where both are
// 16-byte aligned (kVector), else four 4-byte loads. Each kernel issues all its loads before it
// uses any, so that a thread keeps several in flight.
struct Quad {
  float v[4];
};

// Elements 4q .. 4q + 3 of p, 0 past n.
template <bool kVector>
__device__ inline Quad load_quad(const float* p, uint64_t n, uint64_t q) {
  const uint64_t i = 4 * q;
  if (kVector && i + 4 <= n) {
    const float4 f = __ldg(reinterpret_cast<const float4*>(p + i));
    return {{f.x, f.y, f.z, f.w}};
  }
  Quad out{{0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
  for (uint32_t k = 0; k < 4; ++k) {
    if (i + k < n) out.v[k] = __ldg(p + i + k);
  }
  return out;
}

// Turns the quad of g into the kept |v| of v = g (+ the quad of e), counting bad v and raising
// `largest`.
__device__ inline void keep_quad(Quad& g, const Quad* e, uint32_t& bad, float& largest) {
#pragma unroll
  for (uint32_t k = 0; k < 4; ++k) {
    const float v = rules::ef_value(g.v[k], e ? &e->v[k] : nullptr);
    bad += !rules::finite(v);
    g.v[k] = rules::kept_magnitude(v);
    largest = fmaxf(largest, g.v[k]);
  }
}

// ---- the count and the largest kept |v| (qsgd's local scale): order-free, grid-stride --------

constexpr uint32_t kMaxPassThreads = 256;
constexpr uint32_t kMaxPassQuads = 4;  // quads in flight per thread and input
constexpr uint32_t kMaxPassRound = kMaxPassThreads * kMaxPassQuads;
constexpr uint64_t kMaxPassBlocks = 4096;

template <bool kVector>
__global__ void __launch_bounds__(kMaxPassThreads)
    abs_max_kernel(const float* g, const float* e, uint64_t n, Tally* tally) {
  const uint64_t quads = (n + 3) / 4;
  uint32_t bad = 0;
  float largest = 0.0f;
  for (uint64_t base = static_cast<uint64_t>(blockIdx.x) * kMaxPassRound; base < quads;
       base += static_cast<uint64_t>(gridDim.x) * kMaxPassRound) {
    Quad gq[kMaxPassQuads], eq[kMaxPassQuads];
#pragma unroll
    for (uint32_t r = 0; r < kMaxPassQuads; ++r) {
      const uint64_t q = base + r * kMaxPassThreads + threadIdx.x;
      gq[r] = load_quad<kVector>(g, n, q);
      if (e) eq[r] = load_quad<kVector>(e, n, q);
    }
#pragma unroll
    for (uint32_t r = 0; r < kMaxPassQuads; ++r)
      keep_quad(gq[r], e ? &eq[r] : nullptr, bad, largest);
  }
  block_tally<kMaxPassThreads>(&tally->count[0], bad, &tally->max[0], float_bits(largest));
}

// ---- the ordered |v| sum (sign's scale): the order of rules::kSumBlock, two levels --------------

constexpr uint32_t kSumThreads = 256;
constexpr uint32_t kSumQuads = kSumBlock / 4 / kSumThreads;

// Lane `lane`'s float sum of kept[lane], kept[lane + 8], ... below `summed`.
__device__ inline float lane_sum(const float* kept, uint32_t lane, uint32_t summed) {
  float sum = 0.0f;
  if (summed == kSumBlock) {
#pragma unroll 32
    for (uint32_t j = lane; j < kSumBlock; j += kSumLanes) sum += kept[j];
  } else {
    for (uint32_t j = lane; j < summed; j += kSumLanes) sum += kept[j];
  }
  return sum;
}

// Level 1, one block per kSumBlock elements: every thread loads its quads of g and e at once and
// stages their kept |v| in shared memory; threads 0..7 then sum the lanes (the serial float
// chains the order fixes) and thread 0 adds them in order into the block's double. Also the count
// of bad v and the largest kept |v|.
template <bool kVector>
__global__ void __launch_bounds__(kSumThreads)
    abs_block_sums_kernel(const float* g, const float* e, uint64_t n, double* block_sums,
                          Tally* tally) {
  __shared__ __align__(16) float kept[kSumBlock];
  const uint64_t first_quad = static_cast<uint64_t>(blockIdx.x) * (kSumBlock / 4);
  Quad gq[kSumQuads], eq[kSumQuads];
#pragma unroll
  for (uint32_t r = 0; r < kSumQuads; ++r) {
    const uint64_t q = first_quad + r * kSumThreads + threadIdx.x;
    gq[r] = load_quad<kVector>(g, n, q);
    if (e) eq[r] = load_quad<kVector>(e, n, q);
  }
  uint32_t bad = 0;
  float largest = 0.0f;
#pragma unroll
  for (uint32_t r = 0; r < kSumQuads; ++r) {
    keep_quad(gq[r], e ? &eq[r] : nullptr, bad, largest);
    const Quad& k = gq[r];
    reinterpret_cast<float4*>(kept)[r * kSumThreads + threadIdx.x] =
        make_float4(k.v[0], k.v[1], k.v[2], k.v[3]);
  }
  block_tally<kSumThreads>(&tally->count[0], bad, &tally->max[0], float_bits(largest));
  const uint64_t first = static_cast<uint64_t>(blockIdx.x) * kSumBlock;
  const uint64_t whole = n & ~uint64_t{7};
  const uint32_t summed =
      first < whole ? static_cast<uint32_t>(min(whole - first, uint64_t{kSumBlock})) : 0;
  __syncthreads();
  if (threadIdx.x >= kSumLanes) return;
  constexpr unsigned kLanes = (1u << kSumLanes) - 1;
  const float lane = lane_sum(kept, threadIdx.x, summed);
  double block = 0.0;
  for (uint32_t l = 0; l < kSumLanes; ++l) block += __shfl_sync(kLanes, lane, l);
  if (threadIdx.x == 0) block_sums[blockIdx.x] = block;
}

constexpr uint32_t kOrderThreads = 256;
constexpr uint32_t kOrderPerThread = 8;
constexpr uint32_t kOrderChunk = kOrderThreads * kOrderPerThread;

// One chunk of the block sums, kOrderPerThread per thread (0 past `blocks`).
struct Chunk {
  double v[kOrderPerThread];
};

__device__ inline Chunk load_chunk(const double* block_sums, uint64_t blocks, uint64_t first) {
  Chunk chunk;
#pragma unroll
  for (uint32_t k = 0; k < kOrderPerThread; ++k) {
    const uint64_t b = first + k * kOrderThreads + threadIdx.x;
    chunk.v[k] = b < blocks ? block_sums[b] : 0.0;
  }
  return chunk;
}

__device__ inline void store_chunk(double* staged, const Chunk& chunk) {
#pragma unroll
  for (uint32_t k = 0; k < kOrderPerThread; ++k)
    staged[k * kOrderThreads + threadIdx.x] = chunk.v[k];
}

// `sum` plus staged[0], staged[1], ... staged[count - 1], one by one.
__device__ inline double add_in_order(double sum, const double* staged, uint64_t count) {
  if (count == kOrderChunk) {
#pragma unroll 32
    for (uint32_t j = 0; j < kOrderChunk; ++j) sum += staged[j];
  } else {
    for (uint32_t j = 0; j < count; ++j) sum += staged[j];
  }
  return sum;
}

// Level 2, one block: thread 0 adds the block sums in order from shared memory (a chain of double
// adds, the order's floor) while the other threads stage the next chunk; then the last n % 8
// elements one by one.
__global__ void __launch_bounds__(kOrderThreads)
    ordered_sum_kernel(const double* block_sums, uint64_t blocks, const float* g, const float* e,
                       uint64_t n, Tally* tally) {
  __shared__ double staged[2][kOrderChunk];
  store_chunk(staged[0], load_chunk(block_sums, blocks, 0));
  double sum = 0.0;
  uint32_t buffer = 0;
  for (uint64_t first = 0; first < blocks; first += kOrderChunk, buffer ^= 1) {
    __syncthreads();
    const Chunk next = load_chunk(block_sums, blocks, first + kOrderChunk);
    if (threadIdx.x == 0) {
      sum = add_in_order(sum, staged[buffer], min(blocks - first, uint64_t{kOrderChunk}));
    }
    store_chunk(staged[buffer ^ 1], next);
  }
  if (threadIdx.x != 0) return;
  for (uint64_t i = n & ~uint64_t{7}; i < n; ++i) {
    sum += rules::kept_magnitude(rules::ef_value(g[i], e ? e + i : nullptr));
  }
  tally->sum = sum;
}

using SignStage = TileStage<4>;
constexpr uint32_t kSignTileElements = SignStage::kTileBytes * 8;

constexpr uint32_t kWordsAhead = 8;
constexpr uint32_t kWarps = kTileThreads / 32;

// A warp turns 32 elements into one little-endian word of the bitmap (lane k is bit k). It loads
// the elements of kWordsAhead words before it stores any (a store may alias a later load), to keep
// that many loads in flight.
__global__ void __launch_bounds__(kTileThreads)
    sign_encode_kernel(const float* g, float* e, uint8_t* bits, uint64_t n, float scale,
                       CrcSink sink) {
  __shared__ SignStage stage;
  stage.init_table();
  const TileSpan tile = tile_span(n, kSignTileElements);
  const uint64_t tile_offset = tile.first / 8;
  const uint32_t tile_bytes = (tile.count + 7) / 8;
  const uint32_t lane = threadIdx.x % 32;
  for (uint32_t first_word = threadIdx.x / 32; first_word * 32 < tile.count;
       first_word += kWordsAhead * kWarps) {
    float gs[kWordsAhead], es[kWordsAhead];
#pragma unroll
    for (uint32_t a = 0; a < kWordsAhead; ++a) {
      const uint32_t j = (first_word + a * kWarps) * 32 + lane;
      gs[a] = j < tile.count ? g[tile.first + j] : 0.0f;
      es[a] = e && j < tile.count ? e[tile.first + j] : 0.0f;
    }
#pragma unroll
    for (uint32_t a = 0; a < kWordsAhead; ++a) {
      const uint32_t word = first_word + a * kWarps;
      if (word * 32 >= tile.count) break;
      const uint32_t j = word * 32 + lane;
      bool bit = false;
      if (j < tile.count) {
        const uint64_t i = tile.first + j;
        const float residual = es[a];
        const float v = rules::ef_value(gs[a], e ? &residual : nullptr);
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

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

Status launch_abs_stats(const float* g, const float* e, uint64_t n, double* block_sums,
                        Tally* tally, cudaStream_t stream) {
  const bool vector = aligned16(g) && (!e || aligned16(e));
  if (!block_sums) {
    const uint64_t blocks =
        std::min((n + 4 * kMaxPassRound - 1) / (4 * kMaxPassRound), kMaxPassBlocks);
    auto* kernel = vector ? abs_max_kernel<true> : abs_max_kernel<false>;
    kernel<<<static_cast<unsigned>(blocks), kMaxPassThreads, 0, stream>>>(g, e, n, tally);
    GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return {};
  }
  const uint64_t blocks = (n + kSumBlock - 1) / kSumBlock;
  auto* kernel = vector ? abs_block_sums_kernel<true> : abs_block_sums_kernel<false>;
  kernel<<<static_cast<unsigned>(blocks), kSumThreads, 0, stream>>>(g, e, n, block_sums, tally);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  ordered_sum_kernel<<<1, kOrderThreads, 0, stream>>>(block_sums, blocks, g, e, n, tally);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
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
