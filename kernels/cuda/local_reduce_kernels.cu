// The node sum of the local workers' buffers and the write-back of the aggregate, on the GPU: the
// conversions of gradgate/kernels/half.h and the order of additions of the host's local reduce,
// so that both give the same bits.
#include "cuda_check.h"
#include "device_tally.cuh"
#include "gradgate/kernels/half.h"
#include "local_reduce_launch.h"

namespace gradgate::kernels::cuda {
namespace {

struct Fp32 {
  using Bits = float;
  __device__ static float to_float(float v) { return v; }
  __device__ static float from_float(float v) { return v; }
};
struct Fp16 {
  using Bits = uint16_t;
  __device__ static float to_float(uint16_t h) { return fp16_to_float(h); }
  __device__ static uint16_t from_float(float v) { return float_to_fp16(v); }
};
struct Bf16 {
  using Bits = uint16_t;
  __device__ static float to_float(uint16_t h) { return bf16_to_float(h); }
  __device__ static uint16_t from_float(float v) { return float_to_bf16(v); }
};

template <typename Type>
__global__ void accumulate_kernel(const typename Type::Bits* in, float* out, uint64_t n,
                                  bool first) {
  for (uint64_t i = grid_first(); i < n; i += grid_stride()) {
    const float value = Type::to_float(in[i]);
    out[i] = first ? value : out[i] + value;
  }
}

template <typename Type>
__global__ void convert_kernel(const float* values, typename Type::Bits* out, uint64_t n) {
  for (uint64_t i = grid_first(); i < n; i += grid_stride()) out[i] = Type::from_float(values[i]);
}

// Runs `launch` with the element type's traits, then reports the launch's status.
template <typename Launch>
Status with_type(ElementType type, Launch&& launch) {
  switch (type) {
    case ElementType::kFp32:
      launch(Fp32{});
      break;
    case ElementType::kFp16:
      launch(Fp16{});
      break;
    case ElementType::kBf16:
      launch(Bf16{});
      break;
    default:
      return Status(ErrorCode::kInvalidArgument, "unknown element type");
  }
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

}  // namespace

Status launch_accumulate_fp32(const void* in, ElementType type, float* out, uint64_t n, bool first,
                              cudaStream_t stream) {
  return with_type(type, [&](auto t) {
    using Type = decltype(t);
    accumulate_kernel<Type><<<element_blocks(n), kElementThreads, 0, stream>>>(
        static_cast<const typename Type::Bits*>(in), out, n, first);
  });
}

Status launch_convert_from_fp32(const float* values, ElementType type, void* out, uint64_t n,
                                cudaStream_t stream) {
  return with_type(type, [&](auto t) {
    using Type = decltype(t);
    convert_kernel<Type><<<element_blocks(n), kElementThreads, 0, stream>>>(
        values, static_cast<typename Type::Bits*>(out), n);
  });
}

}  // namespace gradgate::kernels::cuda
