// The topk payload on the device (topk_launch.h): its indices as LEB128 gap varints or a bitmap
// (kernels/cpu/topk_codec.cc has the layout) and its values, written after the selection and read
// back, with every check the CPU decoder makes, before a decode touches its output.
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <cub/device/device_scan.cuh>

#include <algorithm>

#include "cuda_check.h"
#include "device_tally.cuh"
#include "gradgate/kernels/element_rules.h"
#include "sparse_values.cuh"
#include "topk_launch.h"

namespace gradgate::kernels::cuda {
namespace {

constexpr uint64_t kPrefixBytes = 8;
constexpr int kMaxVarintBytes = 5;

__host__ __device__ inline uint32_t gap_of(const uint32_t* index, uint64_t j) {
  return j == 0 ? index[0] : index[j] - index[j - 1] - 1;
}

__host__ __device__ inline uint32_t varint_bytes(uint32_t v) {
  return 1 + (v >= (1u << 7)) + (v >= (1u << 14)) + (v >= (1u << 21)) + (v >= (1u << 28));
}

// The varint size of gap j of `index` (`count` of them), 0 for j == count: read by the scan that
// makes the offsets, so the sizes are never stored.
struct VarintSize {
  const uint32_t* index;
  uint64_t count;
  __host__ __device__ uint64_t operator()(uint64_t j) const {
    return j < count ? varint_bytes(gap_of(index, j)) : 0;
  }
};

using VarintSizes = thrust::transform_iterator<VarintSize, thrust::counting_iterator<uint64_t>>;

VarintSizes varint_sizes(const uint32_t* index, uint64_t count) {
  return VarintSizes(thrust::counting_iterator<uint64_t>(0), VarintSize{index, count});
}

__global__ void write_indices_kernel(const uint32_t* index, const uint64_t* offsets,
                                     TopkPayloadOut out) {
  auto* payload = reinterpret_cast<uint8_t*>(out.payload);
  if (grid_first() == 0) {
    reinterpret_cast<uint32_t*>(payload)[0] = out.count;
    reinterpret_cast<uint32_t*>(payload)[1] = out.index_bytes;
  }
  uint8_t* indices = payload + kPrefixBytes;
  for (uint64_t j = grid_first(); j < out.count; j += grid_stride()) {
    const uint32_t i = index[j];
    if (out.bitmap) {
      atomicOr(reinterpret_cast<uint32_t*>(indices) + i / 32, 1u << (i % 32));
      continue;
    }
    uint8_t* at = indices + offsets[j];
    uint32_t gap = gap_of(index, j);
    while (gap >= 0x80) {
      *at++ = static_cast<uint8_t>(gap | 0x80);
      gap >>= 7;
    }
    *at = static_cast<uint8_t>(gap);
  }
}

__global__ void write_values_kernel(const uint32_t* index, const float* value, TopkPayloadOut out,
                                    float* e) {
  uint8_t* values = reinterpret_cast<uint8_t*>(out.payload) + kPrefixBytes + out.index_bytes;
  for (uint64_t j = grid_first(); j < out.count; j += grid_stride()) {
    const float v = value[j];
    if (out.fp16) {
      const uint16_t h = rules::half_encode<rules::Fp16>(v);
      store_le_bytes(values + 2 * j, h, 2);
      if (e) e[index[j]] = v - rules::Fp16::decode(h);
    } else {
      store_le_bytes(values + 4 * j, float_bits(v), 4);
      if (e) e[index[j]] = 0.0f;
    }
  }
}

// marks[b] = the indices that byte b ends (varints) or holds (bitmap); marks[byte_count] = 0.
__global__ void mark_kernel(const uint8_t* bytes, uint64_t byte_count, bool bitmap,
                            uint32_t* marks) {
  for (uint64_t b = grid_first(); b <= byte_count; b += grid_stride()) {
    if (b == byte_count) {
      marks[b] = 0;
    } else {
      marks[b] = bitmap ? __popc(bytes[b]) : (bytes[b] & 0x80) == 0;
    }
  }
}

// With marks[b] now the indices before byte b: bitmap bits become indices; each varint that
// starts at byte b becomes steps[marks[b]] = gap + 1 (an index is the sum of the steps so far,
// less 1).
__global__ void emit_kernel(TopkIndexIn in, const uint32_t* marks, uint32_t* index, uint64_t* steps,
                            Tally* tally) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(in.bytes);
  uint32_t bad = 0;
  for (uint64_t b = grid_first(); b < in.byte_count; b += grid_stride()) {
    if (in.bitmap) {
      uint64_t position = marks[b];
      for (uint32_t bits = bytes[b]; bits != 0; bits &= bits - 1, ++position) {
        const uint64_t i = b * 8 + (__ffs(bits) - 1);
        bad += i >= in.elements;
        if (i < in.elements && position < in.count) index[position] = static_cast<uint32_t>(i);
      }
      continue;
    }
    if (b != 0 && (bytes[b - 1] & 0x80) != 0) continue;  // not the start of a varint
    uint64_t gap = 0;
    bool ended = false;
    for (int s = 0; s < kMaxVarintBytes && b + s < in.byte_count; ++s) {
      const uint8_t byte = bytes[b + s];
      gap |= static_cast<uint64_t>(byte & 0x7F) << (7 * s);
      if ((byte & 0x80) == 0) {
        ended = true;
        break;
      }
    }
    bad += !ended;
    if (ended && marks[b] < in.count) steps[marks[b]] = gap + 1;
  }
  tally_count(&tally->count[2], bad);
}

__global__ void steps_to_indices_kernel(const uint64_t* sums, uint64_t count, uint64_t elements,
                                        uint32_t* index, Tally* tally) {
  uint32_t bad = 0;
  for (uint64_t j = grid_first(); j < count; j += grid_stride()) {
    const uint64_t i = sums[j] - 1;
    bad += i >= elements;
    index[j] = static_cast<uint32_t>(i);
  }
  tally_count(&tally->count[1], bad);
}

unsigned blocks_for(uint64_t count) { return element_blocks(std::max<uint64_t>(count, 1)); }

constexpr size_t kAlign = 256;
size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// The decode scratch: marks, then steps, then CUB's.
struct DecodeLayout {
  size_t marks, steps, cub, total;
};

Result<DecodeLayout> decode_layout(const TopkIndexIn& in) {
  size_t mark_scan = 0, step_scan = 0;
  GRADGATE_CUDA_RETURN_IF_ERROR(
      cub::DeviceScan::ExclusiveSum(nullptr, mark_scan, static_cast<uint32_t*>(nullptr),
                                    static_cast<int64_t>(in.byte_count + 1)));
  GRADGATE_CUDA_RETURN_IF_ERROR(cub::DeviceScan::InclusiveSum(
      nullptr, step_scan, static_cast<uint64_t*>(nullptr), static_cast<int64_t>(in.count)));
  DecodeLayout layout;
  layout.marks = 0;
  layout.steps = aligned((in.byte_count + 1) * sizeof(uint32_t));
  layout.cub = layout.steps + aligned(in.count * sizeof(uint64_t));
  layout.total = layout.cub + aligned(std::max(mark_scan, step_scan));
  return layout;
}

}  // namespace

Result<size_t> topk_varint_temp_bytes(uint64_t count) {
  size_t bytes = 0;
  GRADGATE_CUDA_RETURN_IF_ERROR(cub::DeviceScan::ExclusiveSum(
      nullptr, bytes, varint_sizes(nullptr, count), static_cast<uint64_t*>(nullptr),
      static_cast<int64_t>(count + 1)));
  return bytes;
}

Status launch_topk_varint_offsets(const uint32_t* index, uint64_t count, uint64_t* offsets,
                                  void* temp, size_t temp_bytes, cudaStream_t stream) {
  GRADGATE_CUDA_RETURN_IF_ERROR(
      cub::DeviceScan::ExclusiveSum(temp, temp_bytes, varint_sizes(index, count), offsets,
                                    static_cast<int64_t>(count + 1), stream));
  return {};
}

Status launch_topk_write(const uint32_t* index, const float* value, const uint64_t* offsets,
                         const TopkPayloadOut& out, float* e, cudaStream_t stream) {
  if (out.bitmap) {
    GRADGATE_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(out.payload + kPrefixBytes, 0, out.index_bytes, stream));
  }
  write_indices_kernel<<<blocks_for(out.count), kElementThreads, 0, stream>>>(index, offsets, out);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  if (out.count == 0) return {};
  write_values_kernel<<<blocks_for(out.count), kElementThreads, 0, stream>>>(index, value, out, e);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

Result<size_t> topk_decode_temp_bytes(const TopkIndexIn& in) {
  auto layout = decode_layout(in);
  if (!layout.ok()) return layout.status();
  return layout->total;
}

Status launch_topk_decode_indices(const TopkIndexIn& in, uint32_t* index, void* temp,
                                  size_t temp_bytes, Tally* tally, cudaStream_t stream) {
  auto layout = decode_layout(in);
  if (!layout.ok()) return layout.status();
  if (temp_bytes < layout->total) {
    return Status(ErrorCode::kInternal, "topk decode scratch is too small");
  }
  auto* base = static_cast<std::byte*>(temp);
  auto* marks = reinterpret_cast<uint32_t*>(base + layout->marks);
  auto* steps = reinterpret_cast<uint64_t*>(base + layout->steps);
  void* cub_temp = base + layout->cub;
  size_t cub_bytes = layout->total - layout->cub;
  mark_kernel<<<blocks_for(in.byte_count + 1), kElementThreads, 0, stream>>>(
      reinterpret_cast<const uint8_t*>(in.bytes), in.byte_count, in.bitmap, marks);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  GRADGATE_CUDA_RETURN_IF_ERROR(cub::DeviceScan::ExclusiveSum(
      cub_temp, cub_bytes, marks, static_cast<int64_t>(in.byte_count + 1), stream));
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
      &tally->word[0], marks + in.byte_count, sizeof(uint32_t), cudaMemcpyDeviceToDevice, stream));
  if (in.count != 0) {
    GRADGATE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(steps, 0, in.count * sizeof(uint64_t), stream));
  }
  if (in.byte_count != 0) {
    emit_kernel<<<blocks_for(in.byte_count), kElementThreads, 0, stream>>>(in, marks, index, steps,
                                                                           tally);
    GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  if (in.bitmap || in.count == 0) return {};
  GRADGATE_CUDA_RETURN_IF_ERROR(cub::DeviceScan::InclusiveSum(
      cub_temp, cub_bytes, steps, static_cast<int64_t>(in.count), stream));
  steps_to_indices_kernel<<<blocks_for(in.count), kElementThreads, 0, stream>>>(
      steps, in.count, in.elements, index, tally);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

}  // namespace gradgate::kernels::cuda
