// FrameStaging (gateway/collective/frame_staging.h) on one GPU: frames encoded into GPU memory
// cross to the host, and received frames to the GPU, through page-locked host memory. The memory
// grows to the largest frame and is kept from step to step. Not thread-safe: one tensor's
// operation uses it at a time.
#pragma once

#include <memory>

#include "gateway/collective/frame_staging.h"
#include "gradgate/kernels/device_ops.h"

namespace gradgate::gateway {

class DeviceFrameStaging final : public FrameStaging {
 public:
  /// Copies on `queue`, which must outlive this.
  explicit DeviceFrameStaging(kernels::DeviceQueue& queue) : queue_(queue) {}

  Result<size_t> encode_to_host(size_t max_bytes, const Write& write,
                                std::span<std::byte> out) override;
  Result<std::span<const std::byte>> to_device(std::span<const std::byte> frame) override;

 private:
  kernels::DeviceQueue& queue_;
  std::unique_ptr<kernels::DeviceMemory> encoded_;  // frames encoded on the GPU
  std::unique_ptr<kernels::DeviceMemory> decoded_;  // frames copied to the GPU to be decoded
  std::unique_ptr<kernels::DeviceMemory> staged_;   // page-locked host memory they cross by
};

}  // namespace gradgate::gateway
