// The kernels the sparse codecs share (sparse_launch.h).
#include "cuda_check.h"
#include "device_tally.cuh"
#include "gradgate/kernels/element_rules.h"
#include "sparse_launch.h"
#include "sparse_values.cuh"
#include "tile_crc.cuh"

namespace gradgate::kernels::cuda {
namespace {

using CrcStage = TileStage<32>;

__global__ void accumulate_kernel(const float* g, float* e, uint64_t n, Tally* tally) {
  uint32_t bad = 0;
  for (uint64_t i = grid_first(); i < n; i += grid_stride()) {
    const float residual = e[i];
    const float v = g[i] + residual;
    const bool ok = rules::finite(v);
    bad += !ok;
    e[i] = ok ? v : residual;
  }
  tally_count(&tally->count[0], bad);
}

__global__ void unaccumulate_kernel(const float* g, float* e, uint64_t n) {
  for (uint64_t i = grid_first(); i < n; i += grid_stride()) {
    e[i] = rules::restored_residual(g[i], 0.0f, e[i]);
  }
}

// One block per tile of the range: the tile's bytes are staged as they lie and folded.
__global__ void __launch_bounds__(kTileThreads)
    body_crc_kernel(const uint8_t* body, uint64_t offset, uint64_t bytes, CrcSink sink) {
  __shared__ CrcStage stage;
  stage.init_table();
  const uint64_t first = static_cast<uint64_t>(blockIdx.x) * CrcStage::kTileBytes;
  const uint64_t left = bytes - first;
  const uint32_t tile_bytes = static_cast<uint32_t>(
      left < CrcStage::kTileBytes ? left : static_cast<uint64_t>(CrcStage::kTileBytes));
  const uint8_t* tile = body + offset + first;
  const uint32_t whole = tile_bytes / 4;
  for (uint32_t w = threadIdx.x; w < whole; w += kTileThreads) {
    stage.put(w * 4, reinterpret_cast<const uint32_t*>(tile)[w]);
  }
  for (uint32_t b = whole * 4 + threadIdx.x; b < tile_bytes; b += kTileThreads) {
    stage.put(b, tile[b]);
  }
  stage.fold_crc(offset + first, tile_bytes, sink);
}

__global__ void count_nonfinite_values_kernel(const uint8_t* values, uint64_t count, bool fp16,
                                              Tally* tally) {
  uint32_t bad = 0;
  for (uint64_t j = grid_first(); j < count; j += grid_stride()) {
    bad += !rules::finite(load_wire_value(values, j, fp16));
  }
  tally_count(&tally->count[0], bad);
}

__global__ void scatter_add_kernel(const uint32_t* index, const uint8_t* values, uint64_t count,
                                   bool fp16, float* out) {
  for (uint64_t j = grid_first(); j < count; j += grid_stride()) {
    out[index[j]] += load_wire_value(values, j, fp16);
  }
}

}  // namespace

Status launch_accumulate(const float* g, float* e, uint64_t n, Tally* tally, cudaStream_t stream) {
  accumulate_kernel<<<element_blocks(n), kElementThreads, 0, stream>>>(g, e, n, tally);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

Status launch_unaccumulate(const float* g, float* e, uint64_t n, cudaStream_t stream) {
  unaccumulate_kernel<<<element_blocks(n), kElementThreads, 0, stream>>>(g, e, n);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

Status launch_body_crc(const std::byte* body, uint64_t offset, uint64_t bytes, const CrcSink& sink,
                       cudaStream_t stream) {
  if (bytes == 0) return {};
  body_crc_kernel<<<tile_blocks(bytes, CrcStage::kTileBytes), kTileThreads, 0, stream>>>(
      reinterpret_cast<const uint8_t*>(body), offset, bytes, sink);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

Status launch_count_nonfinite_values(const std::byte* values, uint64_t count, bool fp16,
                                     Tally* tally, cudaStream_t stream) {
  if (count == 0) return {};
  count_nonfinite_values_kernel<<<element_blocks(count), kElementThreads, 0, stream>>>(
      reinterpret_cast<const uint8_t*>(values), count, fp16, tally);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

Status launch_scatter_add(const uint32_t* index, const std::byte* values, uint64_t count, bool fp16,
                          float* out, cudaStream_t stream) {
  if (count == 0) return {};
  scatter_add_kernel<<<element_blocks(count), kElementThreads, 0, stream>>>(
      index, reinterpret_cast<const uint8_t*>(values), count, fp16, out);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

Status read_device(void* host, const void* device, size_t bytes, cudaStream_t stream) {
  GRADGATE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream));
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return {};
}

}  // namespace gradgate::kernels::cuda
