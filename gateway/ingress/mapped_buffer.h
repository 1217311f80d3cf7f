// A worker's tensor buffer mapped into the gateway: the memfd that came with DECLARE is checked
// (a regular file of exactly the declared size) and mapped shared, read-write. The mapping is
// released when the MappedBuffer goes; the descriptor is closed at once, the mapping keeps the
// memory alive.
#pragma once

#include <cstddef>
#include <utility>

#include "gradgate/base/status.h"

namespace gradgate::gateway {

class MappedBuffer {
 public:
  MappedBuffer() = default;
  MappedBuffer(std::byte* data, size_t bytes) : data_(data), bytes_(bytes) {}
  MappedBuffer(MappedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  MappedBuffer& operator=(MappedBuffer&& other) noexcept;
  MappedBuffer(const MappedBuffer&) = delete;
  MappedBuffer& operator=(const MappedBuffer&) = delete;
  ~MappedBuffer();

  std::byte* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
};

/// Maps `fd` if it is a regular file of `expected_bytes`; takes ownership of `fd` (closes it).
/// kInvalidArgument for a descriptor the protocol does not allow (another size, not a memfd sealed
/// with F_SEAL_SHRINK, not writable); kResourceExhausted when the gateway cannot map more.
Result<MappedBuffer> map_worker_buffer(int fd, size_t expected_bytes);

}  // namespace gradgate::gateway
