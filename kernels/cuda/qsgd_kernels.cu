// qsgd: stochastic quantisation with error feedback, its undo, level sums and decodes.
#include "cuda_check.h"
#include "device_tally.cuh"
#include "gradgate/kernels/element_rules.h"
#include "gradgate/kernels/philox.h"
#include "launch.h"
#include "tile_crc.cuh"

namespace gradgate::kernels::cuda {
namespace {

using Stage = TileStage<32>;

// One Philox call serves 8 elements (philox.h): thread L of a group of 8 draws the bits of block
// 8m + L and quantises elements 64m + 8s + L, s = 0..7, so a group covers 64 elements. A thread
// loads its 8 elements of g and e before it stores any, to keep 16 loads in flight.
constexpr uint32_t kGroupElements = 64;
constexpr uint32_t kGroupSteps = kGroupElements / 8;
constexpr uint32_t kRoundElements = kTileThreads / 8 * kGroupElements;

template <typename Int>
__global__ void __launch_bounds__(kTileThreads)
    qsgd_encode_kernel(const float* g, float* e, Int* out, uint64_t n, rules::QsgdGrid grid,
                       rules::QsgdKey key, CrcSink sink, Tally* tally) {
  constexpr uint32_t kTileElements = Stage::kTileBytes / sizeof(Int);
  static_assert(kTileElements % kRoundElements == 0);
  __shared__ Stage stage;
  stage.init_table();
  const TileSpan tile = tile_span(n, kTileElements);
  const uint32_t lane = threadIdx.x % 8;
  uint32_t bad = 0;
  for (uint32_t base = threadIdx.x / 8 * kGroupElements; base < tile.count;
       base += kRoundElements) {
    const Philox4 bits = rules::qsgd_bits(philox_block(tile.first + base + lane), key);
    float gs[kGroupSteps], es[kGroupSteps];
#pragma unroll
    for (uint32_t s = 0; s < kGroupSteps; ++s) {
      const uint32_t j = base + lane + 8 * s;
      gs[s] = j < tile.count ? g[tile.first + j] : 0.0f;
      es[s] = e && j < tile.count ? e[tile.first + j] : 0.0f;
    }
#pragma unroll
    for (uint32_t s = 0; s < kGroupSteps; ++s) {
      const uint32_t j = base + lane + 8 * s;
      if (j >= tile.count) break;
      const uint64_t i = tile.first + j;
      const float residual = es[s];
      const float v = rules::ef_value(gs[s], e ? &residual : nullptr);
      // i = 64m + 8s + lane picks the word and half that 8s picks (philox.h), a constant here.
      const int32_t level = rules::qsgd_level(v, rules::qsgd_uniform(bits, 8 * s), grid);
      out[i] = static_cast<Int>(level);
      stage.put(j * static_cast<uint32_t>(sizeof(Int)), static_cast<Int>(level));
      if (e) e[i] = rules::residual_after(v, rules::qsgd_value(level, grid.to_value), residual);
      bad += !rules::finite(v);
    }
  }
  stage.fold_crc(tile.first * sizeof(Int), tile.count * static_cast<uint32_t>(sizeof(Int)), sink);
  tally_count(&tally->count[0], bad);
}

template <typename Int>
__global__ void qsgd_restore_kernel(const float* g, const Int* sent, float* e, uint64_t n,
                                    float to_value) {
  for (uint64_t i = grid_first(); i < n; i += grid_stride()) {
    e[i] = rules::restored_residual(g[i], 0.0f + rules::qsgd_value(sent[i], to_value), e[i]);
  }
}

template <typename Int>
__global__ void __launch_bounds__(kTileThreads)
    qsgd_sum_kernel(const Int* a, const Int* b, Int* out, uint64_t n, CrcSink sink, Tally* tally) {
  constexpr uint32_t kTileElements = Stage::kTileBytes / sizeof(Int);
  __shared__ Stage stage;
  stage.init_table();
  const TileSpan tile = tile_span(n, kTileElements);
  uint32_t max_a = 0, max_b = 0;
  for (uint32_t j = threadIdx.x; j < tile.count; j += kTileThreads) {
    const uint64_t i = tile.first + j;
    const Int la = a[i], lb = b[i];
    const Int sum = rules::qsgd_sum(la, lb);
    out[i] = sum;
    stage.put(j * static_cast<uint32_t>(sizeof(Int)), sum);
    max_a = max(max_a, level_magnitude(la));
    max_b = max(max_b, level_magnitude(lb));
  }
  stage.fold_crc(tile.first * sizeof(Int), tile.count * static_cast<uint32_t>(sizeof(Int)), sink);
  tally_max(&tally->max[0], max_a);
  tally_max(&tally->max[1], max_b);
}

template <typename Int>
__global__ void qsgd_decode_kernel(const Int* in, const float* scale, int levels, float* out,
                                   uint64_t n, bool overwrite, Tally* tally) {
  const float to_value = *scale / static_cast<float>(levels);
  uint32_t largest = 0;
  for (uint64_t i = grid_first(); i < n; i += grid_stride()) {
    const Int level = in[i];
    out[i] = (overwrite ? 0.0f : out[i]) + rules::qsgd_value(level, to_value);
    largest = max(largest, level_magnitude(level));
  }
  tally_max(&tally->max[0], largest);
}

template <typename Int>
__global__ void qsgd_max_level_kernel(const Int* in, uint64_t n, int slot, Tally* tally) {
  uint32_t largest = 0;
  for (uint64_t i = grid_first(); i < n; i += grid_stride()) {
    largest = max(largest, level_magnitude(in[i]));
  }
  tally_max(&tally->max[slot], largest);
}

// Runs `launch` with the integer type of `width` bytes.
template <typename Launch>
Status with_width(size_t width, Launch&& launch) {
  switch (width) {
    case 1:
      launch(int8_t{});
      break;
    case 2:
      launch(int16_t{});
      break;
    case 4:
      launch(int32_t{});
      break;
    default:
      return Status(ErrorCode::kInternal, "qsgd levels are 1, 2 or 4 bytes");
  }
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

}  // namespace

Status launch_qsgd_encode(size_t width, const float* g, float* e, void* out, uint64_t n,
                          const rules::QsgdGrid& grid, const rules::QsgdKey& key,
                          const CrcSink& sink, Tally* tally, cudaStream_t stream) {
  return with_width(width, [&](auto type) {
    using Int = decltype(type);
    qsgd_encode_kernel<Int>
        <<<tile_blocks(n, Stage::kTileBytes / sizeof(Int)), kTileThreads, 0, stream>>>(
            g, e, static_cast<Int*>(out), n, grid, key, sink, tally);
  });
}

Status launch_qsgd_restore(size_t width, const float* g, const void* sent, float* e, uint64_t n,
                           float to_value, cudaStream_t stream) {
  return with_width(width, [&](auto type) {
    using Int = decltype(type);
    qsgd_restore_kernel<Int><<<element_blocks(n), kElementThreads, 0, stream>>>(
        g, static_cast<const Int*>(sent), e, n, to_value);
  });
}

Status launch_qsgd_sum(size_t width, const void* a, const void* b, void* out, uint64_t n,
                       const CrcSink& sink, Tally* tally, cudaStream_t stream) {
  return with_width(width, [&](auto type) {
    using Int = decltype(type);
    qsgd_sum_kernel<Int>
        <<<tile_blocks(n, Stage::kTileBytes / sizeof(Int)), kTileThreads, 0, stream>>>(
            static_cast<const Int*>(a), static_cast<const Int*>(b), static_cast<Int*>(out), n, sink,
            tally);
  });
}

Status launch_qsgd_decode(size_t width, const void* in, const float* scale, int levels, float* out,
                          uint64_t n, bool overwrite, Tally* tally, cudaStream_t stream) {
  return with_width(width, [&](auto type) {
    using Int = decltype(type);
    qsgd_decode_kernel<Int><<<element_blocks(n), kElementThreads, 0, stream>>>(
        static_cast<const Int*>(in), scale, levels, out, n, overwrite, tally);
  });
}

Status launch_qsgd_max_level(size_t width, const void* in, uint64_t n, int slot, Tally* tally,
                             cudaStream_t stream) {
  return with_width(width, [&](auto type) {
    using Int = decltype(type);
    qsgd_max_level_kernel<Int><<<element_blocks(n), kElementThreads, 0, stream>>>(
        static_cast<const Int*>(in), n, slot, tally);
  });
}

}  // namespace gradgate::kernels::cuda
