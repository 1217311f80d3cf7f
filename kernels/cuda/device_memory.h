// Owning pointers to CUDA memory: device memory from cudaMalloc and pinned host memory from
// cudaMallocHost, freed when the pointer goes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>

#include "cuda_check.h"

namespace gradgate::kernels::cuda {

struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
struct PinnedFree {
  void operator()(void* p) const { cudaFreeHost(p); }
};

template <typename T>
using DevicePtr = std::unique_ptr<T, DeviceFree>;
template <typename T>
using PinnedPtr = std::unique_ptr<T, PinnedFree>;

/// `count` uninitialised T in the current device's memory.
template <typename T>
Result<DevicePtr<T>> device_alloc(size_t count) {
  void* p = nullptr;
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, count * sizeof(T)));
  return DevicePtr<T>(static_cast<T*>(p));
}

/// One value-initialised T in pinned host memory.
template <typename T>
Result<PinnedPtr<T>> pinned_alloc() {
  void* p = nullptr;
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaMallocHost(&p, sizeof(T)));
  return PinnedPtr<T>(new (p) T{});
}

}  // namespace gradgate::kernels::cuda
