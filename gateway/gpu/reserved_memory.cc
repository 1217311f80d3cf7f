#include "gateway/gpu/reserved_memory.h"

#include <utility>

namespace gradgate::gateway {

Result<std::byte*> reserve(std::unique_ptr<kernels::DeviceMemory>& slot, int device, size_t bytes,
                           bool pinned_host) {
  if (!slot || slot->bytes() < bytes) {
    slot.reset();
    auto made = pinned_host ? kernels::DeviceMemory::allocate_pinned_host(device, bytes)
                            : kernels::DeviceMemory::allocate(device, bytes);
    if (!made.ok()) return made.status();
    slot = std::move(made).value();
  }
  return slot->data();
}

}  // namespace gradgate::gateway
