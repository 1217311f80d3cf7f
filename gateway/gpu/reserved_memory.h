// Memory a tensor's GPU work keeps from step to step, grown to the largest need.
#pragma once

#include <cstddef>
#include <memory>

#include "gradgate/kernels/device_ops.h"

namespace gradgate::gateway {

/// At least `bytes` in `slot`, on GPU `device` or (`pinned_host`) page-locked host memory for
/// it: the slot's memory, or new memory in its place when it was empty or too small.
Result<std::byte*> reserve(std::unique_ptr<kernels::DeviceMemory>& slot, int device, size_t bytes,
                           bool pinned_host = false);

}  // namespace gradgate::gateway
