#include "scratch.h"

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace gradgate::kernels::cuda {

Result<Scratch*> Scratch::current() {
  thread_local std::vector<std::unique_ptr<Scratch>> by_device;
  int device = 0;
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  const auto index = static_cast<size_t>(device);
  if (index >= by_device.size()) by_device.resize(index + 1);
  if (!by_device[index]) {
    auto tally = device_alloc<Tally>(1);
    if (!tally.ok()) return tally.status();
    auto host = pinned_alloc<Tally>();
    if (!host.ok()) return host.status();
    by_device[index].reset(new Scratch(std::move(tally).value(), std::move(host).value()));
  }
  return by_device[index].get();
}

Result<void*> Scratch::area(size_t bytes) {
  if (bytes > area_bytes_) {
    area_.reset();
    area_bytes_ = 0;
    auto area = device_alloc<std::byte>(bytes);
    if (!area.ok()) return area.status();
    area_ = std::move(area).value();
    area_bytes_ = bytes;
  }
  return static_cast<void*>(area_.get());
}

Status Scratch::begin(cudaStream_t stream) const {
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(tally_.get(), 0, sizeof(Tally), stream));
  return {};
}

Status Scratch::copy_word(int slot, const void* from, size_t bytes, cudaStream_t stream) const {
  auto* word = reinterpret_cast<std::byte*>(tally_.get()) + offsetof(Tally, word) +
               static_cast<size_t>(slot) * sizeof(unsigned int);
  GRADGATE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(word, from, bytes, cudaMemcpyDeviceToDevice, stream));
  return {};
}

Result<Tally> Scratch::finish(cudaStream_t stream) const {
  GRADGATE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host_.get(), tally_.get(), sizeof(Tally), cudaMemcpyDeviceToHost, stream));
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return *host_;
}

}  // namespace gradgate::kernels::cuda
