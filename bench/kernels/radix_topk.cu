#include <cub/device/device_radix_sort.cuh>

#include "cuda_check.h"
#include "radix_topk.h"

namespace gradgate::bench {
namespace {

__global__ void magnitude_keys_kernel(const float* v, uint32_t* keys, uint32_t* indices,
                                      uint64_t n) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    keys[i] = __float_as_uint(v[i]) & 0x7FFFFFFFu;
    indices[i] = static_cast<uint32_t>(i);
  }
}

}  // namespace

Result<std::unique_ptr<RadixTopk>> RadixTopk::make(size_t n) {
  using kernels::cuda::device_alloc;
  std::unique_ptr<RadixTopk> topk(new RadixTopk);
  topk->n_ = n;
  for (auto* buffer :
       {&topk->keys_in_, &topk->keys_out_, &topk->indices_in_, &topk->indices_out_}) {
    auto memory = device_alloc<uint32_t>(n);
    if (!memory.ok()) return memory.status();
    *buffer = std::move(memory).value();
  }
  GRADGATE_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairsDescending(
      nullptr, topk->temporary_bytes_, topk->keys_in_.get(), topk->keys_out_.get(),
      topk->indices_in_.get(), topk->indices_out_.get(), static_cast<int64_t>(n)));
  auto temporary = device_alloc<std::byte>(topk->temporary_bytes_);
  if (!temporary.ok()) return temporary.status();
  topk->temporary_ = std::move(temporary).value();
  return Result<std::unique_ptr<RadixTopk>>(std::move(topk));
}

Status RadixTopk::run(const float* v, cudaStream_t stream) {
  constexpr unsigned kThreads = 256;
  const uint64_t blocks = (n_ + kThreads - 1) / kThreads;
  magnitude_keys_kernel<<<static_cast<unsigned>(blocks < 65536 ? blocks : 65536), kThreads, 0,
                          stream>>>(v, keys_in_.get(), indices_in_.get(), n_);
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  GRADGATE_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairsDescending(
      temporary_.get(), temporary_bytes_, keys_in_.get(), keys_out_.get(), indices_in_.get(),
      indices_out_.get(), static_cast<int64_t>(n_), 0, 32, stream));
  return {};
}

}  // namespace gradgate::bench
