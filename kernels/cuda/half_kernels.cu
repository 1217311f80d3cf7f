// fp16 and bf16: the encode with error feedback, its undo, frame sums and decodes.
#include "cuda_check.h"
#include "device_tally.cuh"
#include "gradgate/kernels/element_rules.h"
#include "launch.h"
#include "tile_crc.cuh"
#include "tile_elements.cuh"

namespace gradgate::kernels::cuda {
namespace {

using Stage = TileStage<32>;
constexpr uint32_t kTileElements = Stage::kTileBytes / sizeof(uint16_t);

template <typename Format>
__global__ void __launch_bounds__(kTileThreads)
    half_encode_kernel(const float* g, float* e, uint16_t* out, uint64_t n, CrcSink sink,
                       Tally* tally) {
  __shared__ Stage stage;
  stage.init_table();
  const TileSpan tile = tile_span(n, kTileElements);
  uint32_t bad = 0;
  struct Pair {
    float g, e;
  };
  for_tile_elements<kTileElements>(
      tile.count,
      [&](uint32_t j) {
        const uint64_t i = tile.first + j;
        return Pair{g[i], e ? e[i] : 0.0f};
      },
      [&](uint32_t j, Pair p) {
        const uint64_t i = tile.first + j;
        const float residual = p.e;
        const float v = rules::ef_value(p.g, e ? &residual : nullptr);
        const uint16_t h = rules::half_encode<Format>(v);
        out[i] = h;
        stage.put(j * 2, h);
        if (e) e[i] = rules::residual_after(v, Format::decode(h), residual);
        bad += !rules::half_sendable<Format>(v, e != nullptr);
      });
  stage.fold_crc(tile.first * 2, tile.count * 2, sink);
  tally_count(&tally->count[0], bad);
}

template <typename Format>
__global__ void half_restore_kernel(const float* g, const uint16_t* sent, float* e, uint64_t n) {
  for (uint64_t i = grid_first(); i < n; i += grid_stride()) {
    e[i] = rules::restored_residual(g[i], 0.0f + Format::decode(sent[i]), e[i]);
  }
}

template <typename Format>
__global__ void __launch_bounds__(kTileThreads)
    half_sum_kernel(const uint16_t* a, const uint16_t* b, uint16_t* out, uint64_t n, CrcSink sink,
                    Tally* tally) {
  __shared__ Stage stage;
  stage.init_table();
  const TileSpan tile = tile_span(n, kTileElements);
  uint32_t bad_a = 0, bad_b = 0, bad_sum = 0;
  struct Pair {
    uint16_t a, b;
  };
  for_tile_elements<kTileElements>(
      tile.count,
      [&](uint32_t j) {
        const uint64_t i = tile.first + j;
        return Pair{a[i], b[i]};
      },
      [&](uint32_t j, Pair p) {
        const uint16_t h = rules::half_sum<Format>(p.a, p.b);
        out[tile.first + j] = h;
        stage.put(j * 2, h);
        bad_a += !rules::half_finite<Format>(p.a);
        bad_b += !rules::half_finite<Format>(p.b);
        bad_sum += !rules::half_finite<Format>(h);
      });
  stage.fold_crc(tile.first * 2, tile.count * 2, sink);
  tally_count(&tally->count[0], bad_a);
  tally_count(&tally->count[1], bad_b);
  tally_count(&tally->count[2], bad_sum);
}

template <typename Format>
__global__ void half_decode_kernel(const uint16_t* in, float* out, uint64_t n, bool overwrite,
                                   Tally* tally) {
  uint32_t bad = 0;
  for (uint64_t i = grid_first(); i < n; i += grid_stride()) {
    const uint16_t h = in[i];
    out[i] = (overwrite ? 0.0f : out[i]) + Format::decode(h);
    bad += !rules::half_finite<Format>(h);
  }
  tally_count(&tally->count[0], bad);
}

template <typename Format>
__global__ void half_count_nonfinite_kernel(const uint16_t* in, uint64_t n, Tally* tally) {
  uint32_t bad = 0;
  for (uint64_t i = grid_first(); i < n; i += grid_stride()) {
    bad += !rules::half_finite<Format>(in[i]);
  }
  tally_count(&tally->count[0], bad);
}

// Runs `launch` with the rules type of `format`.
template <typename Launch>
Status with_format(HalfFormat format, Launch&& launch) {
  if (format == HalfFormat::kFp16) {
    launch(rules::Fp16{});
  } else {
    launch(rules::Bf16{});
  }
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

}  // namespace

Status launch_half_encode(HalfFormat format, const float* g, float* e, uint16_t* out, uint64_t n,
                          const CrcSink& sink, Tally* tally, cudaStream_t stream) {
  return with_format(format, [&](auto f) {
    half_encode_kernel<decltype(f)>
        <<<tile_blocks(n, kTileElements), kTileThreads, 0, stream>>>(g, e, out, n, sink, tally);
  });
}

Status launch_half_restore(HalfFormat format, const float* g, const uint16_t* sent, float* e,
                           uint64_t n, cudaStream_t stream) {
  return with_format(format, [&](auto f) {
    half_restore_kernel<decltype(f)>
        <<<element_blocks(n), kElementThreads, 0, stream>>>(g, sent, e, n);
  });
}

Status launch_half_sum(HalfFormat format, const uint16_t* a, const uint16_t* b, uint16_t* out,
                       uint64_t n, const CrcSink& sink, Tally* tally, cudaStream_t stream) {
  return with_format(format, [&](auto f) {
    half_sum_kernel<decltype(f)>
        <<<tile_blocks(n, kTileElements), kTileThreads, 0, stream>>>(a, b, out, n, sink, tally);
  });
}

Status launch_half_decode(HalfFormat format, const uint16_t* in, float* out, uint64_t n,
                          bool overwrite, Tally* tally, cudaStream_t stream) {
  return with_format(format, [&](auto f) {
    half_decode_kernel<decltype(f)>
        <<<element_blocks(n), kElementThreads, 0, stream>>>(in, out, n, overwrite, tally);
  });
}

Status launch_half_count_nonfinite(HalfFormat format, const uint16_t* in, uint64_t n, Tally* tally,
                                   cudaStream_t stream) {
  return with_format(format, [&](auto f) {
    half_count_nonfinite_kernel<decltype(f)>
        <<<element_blocks(n), kElementThreads, 0, stream>>>(in, n, tally);
  });
}

}  // namespace gradgate::kernels::cuda
