#include "gateway/ingress/mapped_buffer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace gradgate::gateway {

MappedBuffer& MappedBuffer::operator=(MappedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, bytes_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

MappedBuffer::~MappedBuffer() {
  if (data_ != nullptr) munmap(data_, bytes_);
}

Result<MappedBuffer> map_worker_buffer(int fd, size_t expected_bytes) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int error = errno;
    close(fd);
    return Status(ErrorCode::kInvalidArgument,
                  std::string("fstat of the buffer's descriptor: ") + std::strerror(error));
  }
  if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != expected_bytes) {
    close(fd);
    return Status(ErrorCode::kInvalidArgument,
                  "the buffer's descriptor is " +
                      (S_ISREG(st.st_mode) ? std::to_string(st.st_size) + " bytes"
                                           : std::string("not a regular file")) +
                      ", the tensor needs " + std::to_string(expected_bytes));
  }
  // Unless the size is sealed, the worker could shrink the file while the gateway reads it,
  // and the gateway would die of SIGBUS.
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    close(fd);
    return Status(ErrorCode::kInvalidArgument,
                  "the buffer's descriptor is not a memfd sealed with F_SEAL_SHRINK");
  }
  // The worker could have shrunk the file after the size was checked and sealed it only then:
  // now that the size can no longer shrink, check it once more.
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < expected_bytes) {
    close(fd);
    return Status(ErrorCode::kInvalidArgument,
                  "the buffer's descriptor shrank below the tensor's " +
                      std::to_string(expected_bytes) + " bytes while it was checked");
  }
  void* data = mmap(nullptr, expected_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int error = errno;
  close(fd);
  if (data == MAP_FAILED && (error == ENOMEM || error == EAGAIN || error == ENFILE)) {
    return Status(ErrorCode::kResourceExhausted,
                  "mmap of " + std::to_string(expected_bytes) + " bytes: " + std::strerror(error));
  }
  if (data == MAP_FAILED) {  // a read-only descriptor, a memfd sealed against writes
    return Status(ErrorCode::kInvalidArgument,
                  "the buffer's descriptor cannot be mapped for reading and writing: " +
                      std::string(std::strerror(error)));
  }
  return MappedBuffer(static_cast<std::byte*>(data), expected_bytes);
}

}  // namespace gradgate::gateway
