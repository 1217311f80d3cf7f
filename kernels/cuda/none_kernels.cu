// none: fp32 payloads, copied or summed while checksummed.
#include "cuda_check.h"
#include "device_tally.cuh"
#include "gradgate/kernels/element_rules.h"
#include "launch.h"
#include "tile_crc.cuh"
#include "tile_elements.cuh"

namespace gradgate::kernels::cuda {
namespace {

using Stage = TileStage<32>;
constexpr uint32_t kTileElements = Stage::kTileBytes / sizeof(float);

// out = a (+ b) over one tile, staged for the CRC; bad values of a, of b and of the sum tallied
// apart.
__global__ void __launch_bounds__(kTileThreads)
    none_write_kernel(const float* a, const float* b, float* out, uint64_t n, CrcSink sink,
                      Tally* tally) {
  __shared__ Stage stage;
  stage.init_table();
  const TileSpan tile = tile_span(n, kTileElements);
  uint32_t bad_a = 0, bad_b = 0, bad_sum = 0;
  struct Pair {
    float a, b;
  };
  for_tile_elements<kTileElements>(
      tile.count,
      [&](uint32_t j) {
        const uint64_t i = tile.first + j;
        return Pair{a[i], b ? b[i] : 0.0f};
      },
      [&](uint32_t j, Pair p) {
        float v = p.a;
        bad_a += !rules::finite(v);
        if (b) {
          bad_b += !rules::finite(p.b);
          v += p.b;
          bad_sum += !rules::finite(v);
        }
        out[tile.first + j] = v;
        stage.put(j * 4, v);
      });
  stage.fold_crc(tile.first * 4, tile.count * 4, sink);
  tally_count(&tally->count[0], bad_a);
  tally_count(&tally->count[1], bad_b);
  tally_count(&tally->count[2], bad_sum);
}

__global__ void none_decode_kernel(const float* in, float* out, uint64_t n, bool overwrite,
                                   Tally* tally) {
  uint32_t bad = 0;
  for (uint64_t i = grid_first(); i < n; i += grid_stride()) {
    const float v = in[i];
    if (overwrite) {
      out[i] = v;
      bad += !rules::finite(v);
    } else {
      out[i] += v;
    }
  }
  tally_count(&tally->count[0], bad);
}

__global__ void count_nonfinite_kernel(const float* in, uint64_t n, Tally* tally) {
  uint32_t bad = 0;
  for (uint64_t i = grid_first(); i < n; i += grid_stride()) bad += !rules::finite(in[i]);
  tally_count(&tally->count[0], bad);
}

}  // namespace

Status launch_none_write(const float* a, const float* b, float* out, uint64_t n,
                         const CrcSink& sink, Tally* tally, cudaStream_t stream) {
  none_write_kernel<<<tile_blocks(n, kTileElements), kTileThreads, 0, stream>>>(a, b, out, n, sink,
                                                                                tally);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

Status launch_none_decode(const float* in, float* out, uint64_t n, bool overwrite, Tally* tally,
                          cudaStream_t stream) {
  none_decode_kernel<<<element_blocks(n), kElementThreads, 0, stream>>>(in, out, n, overwrite,
                                                                        tally);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

Status launch_count_nonfinite(const float* in, uint64_t n, Tally* tally, cudaStream_t stream) {
  count_nonfinite_kernel<<<element_blocks(n), kElementThreads, 0, stream>>>(in, n, tally);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

}  // namespace gradgate::kernels::cuda
