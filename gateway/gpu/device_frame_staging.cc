#include "gateway/gpu/device_frame_staging.h"

#include <cstring>

#include "gateway/gpu/reserved_memory.h"

namespace gradgate::gateway {

Result<size_t> DeviceFrameStaging::encode_to_host(size_t max_bytes, const Write& write,
                                                  std::span<std::byte> out) {
  auto device_out = reserve(encoded_, queue_.device(), max_bytes);
  if (!device_out.ok()) return device_out.status();
  auto staged = reserve(staged_, queue_.device(), max_bytes, true);
  if (!staged.ok()) return staged.status();
  auto size = write({*device_out, max_bytes});
  if (!size.ok()) return size.status();
  GRADGATE_RETURN_IF_ERROR(queue_.copy_to_host(*staged, *device_out, *size));
  GRADGATE_RETURN_IF_ERROR(queue_.synchronize());
  std::memcpy(out.data(), *staged, *size);
  return *size;
}

Result<std::span<const std::byte>> DeviceFrameStaging::to_device(std::span<const std::byte> frame) {
  auto device_in = reserve(decoded_, queue_.device(), frame.size());
  if (!device_in.ok()) return device_in.status();
  auto staged = reserve(staged_, queue_.device(), frame.size(), true);
  if (!staged.ok()) return staged.status();
  std::memcpy(*staged, frame.data(), frame.size());
  GRADGATE_RETURN_IF_ERROR(queue_.copy_to_device(*device_in, *staged, frame.size()));
  GRADGATE_RETURN_IF_ERROR(queue_.synchronize());
  return std::span<const std::byte>(*device_in, frame.size());
}

}  // namespace gradgate::gateway
