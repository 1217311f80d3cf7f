// kernels::DeviceMemory and kernels::DeviceQueue on the CUDA runtime. Each call makes its GPU the
// calling thread's current device first: the gateway's threads serve tensors on different GPUs.
#include <cuda_runtime_api.h>

#include "cuda_check.h"
#include "gradgate/kernels/cuda/device_stream.h"
#include "gradgate/kernels/device_ops.h"
#include "local_reduce_launch.h"

namespace gradgate::kernels {
namespace {

cudaStream_t stream_of(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace

Result<std::unique_ptr<DeviceMemory>> DeviceMemory::allocate(int device, size_t bytes) {
  return allocate_on(device, bytes, false);
}

Result<std::unique_ptr<DeviceMemory>> DeviceMemory::allocate_pinned_host(int device, size_t bytes) {
  return allocate_on(device, bytes, true);
}

Result<std::unique_ptr<DeviceMemory>> DeviceMemory::allocate_on(int device, size_t bytes,
                                                                bool pinned_host) {
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  void* data = nullptr;
  const size_t size = bytes == 0 ? 1 : bytes;
  GRADGATE_CUDA_RETURN_IF_ERROR(pinned_host ? cudaMallocHost(&data, size)
                                            : cudaMalloc(&data, size));
  return std::unique_ptr<DeviceMemory>(
      new DeviceMemory(device, static_cast<std::byte*>(data), bytes, pinned_host));
}

DeviceMemory::~DeviceMemory() {
  cudaSetDevice(device_);
  if (pinned_host_) {
    cudaFreeHost(data_);
  } else {
    cudaFree(data_);
  }
}

Result<std::unique_ptr<DeviceQueue>> DeviceQueue::create(int device) {
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  cudaStream_t stream = nullptr;
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return std::unique_ptr<DeviceQueue>(new DeviceQueue(device, stream));
}

DeviceQueue::~DeviceQueue() {
  cudaSetDevice(device_);
  cudaStreamSynchronize(stream_of(stream_));
  cudaStreamDestroy(stream_of(stream_));
}

Status DeviceQueue::make_current() {
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  return {};
}

Status DeviceQueue::wait_for(void* event) {
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  GRADGATE_CUDA_RETURN_IF_ERROR(
      cudaStreamWaitEvent(stream_of(stream_), static_cast<cudaEvent_t>(event), 0));
  return {};
}

Status DeviceQueue::synchronize() {
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_of(stream_)));
  return {};
}

Status DeviceQueue::copy_to_host(void* host, const void* device, size_t bytes) {
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  GRADGATE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_of(stream_)));
  return {};
}

Status DeviceQueue::copy_to_device(void* device, const void* host, size_t bytes) {
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  GRADGATE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_of(stream_)));
  return {};
}

Status DeviceQueue::copy_between(void* to, int to_device, const void* from, int from_device,
                                 size_t bytes) {
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  GRADGATE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyPeerAsync(to, to_device, from, from_device, bytes, stream_of(stream_)));
  return {};
}

Status DeviceQueue::accumulate_fp32(const void* in, ElementType type, float* out, size_t n,
                                    bool first) {
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  return cuda::launch_accumulate_fp32(in, type, out, n, first, stream_of(stream_));
}

Status DeviceQueue::convert_from_fp32(const float* values, ElementType type, void* out, size_t n) {
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  return cuda::launch_convert_from_fp32(values, type, out, n, stream_of(stream_));
}

Status DeviceQueue::fold_residual(const Stream& stream, float* out) {
  const auto* device_stream = dynamic_cast<const cuda::DeviceStream*>(&stream);
  if (device_stream == nullptr) {
    return Status(ErrorCode::kInvalidArgument, "fold_residual: not a stream of a CUDA codec");
  }
  if (!device_stream->has_residual()) return {};
  return accumulate_fp32(device_stream->device_residual(), ElementType::kFp32, out,
                         stream.desc().elements, /*first=*/false);
}

}  // namespace gradgate::kernels
