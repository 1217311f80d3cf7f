// Host-callable GPU operations of the gateway's device data path: device memory, a CUDA stream per
// tensor, the copies that stage frames between the GPU and the host, and the node-level sum of the
// local workers' buffers (and the write-back of the aggregate in their dtype), bit-identical to the
// host's (gateway/core/local_reduce.h): the same order of additions, the same rounding.
//
// The header has no CUDA types, so that the gateway compiles the same with and without CUDA: in a
// build without CUDA every call returns kUnsupported ("built without CUDA"), and without a usable
// GPU kUnavailable with the CUDA runtime's reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "gradgate/base/status.h"

namespace gradgate::kernels {

class Stream;

/// Element types of worker buffers, numbered as the gateway's Dtype.
enum class ElementType : uint8_t { kFp32 = 0, kFp16 = 1, kBf16 = 2 };

/// Memory of the GPU data path, owned, freed by the destructor: device memory of one GPU, or
/// page-locked host memory through which frames travel between that GPU and the transport.
class DeviceMemory {
 public:
  /// `bytes` uninitialised bytes on GPU `device` (256-byte aligned).
  static Result<std::unique_ptr<DeviceMemory>> allocate(int device, size_t bytes);
  /// `bytes` uninitialised bytes of page-locked host memory for copies to and from GPU `device`:
  /// they run at the bus's rate, without the driver's bounce through a buffer of its own.
  static Result<std::unique_ptr<DeviceMemory>> allocate_pinned_host(int device, size_t bytes);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  std::byte* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  int device() const { return device_; }
  bool pinned_host() const { return pinned_host_; }

 private:
  DeviceMemory(int device, std::byte* data, size_t bytes, bool pinned_host)
      : device_(device), data_(data), bytes_(bytes), pinned_host_(pinned_host) {}
  static Result<std::unique_ptr<DeviceMemory>> allocate_on(int device, size_t bytes,
                                                           bool pinned_host);
  int device_;
  std::byte* data_;
  size_t bytes_;
  bool pinned_host_;
};

/// A CUDA stream on one GPU, owned, on which one tensor's device work runs in order. Not
/// thread-safe: one all-reduce at a time uses it. Every call enqueues and returns; synchronize()
/// waits for what was enqueued and reports the first failure of it.
class DeviceQueue {
 public:
  static Result<std::unique_ptr<DeviceQueue>> create(int device);
  ~DeviceQueue();
  DeviceQueue(const DeviceQueue&) = delete;
  DeviceQueue& operator=(const DeviceQueue&) = delete;

  int device() const { return device_; }
  /// The cudaStream_t, for kernels::StepContext::cuda_stream.
  void* cuda_stream() const { return stream_; }

  /// Makes the queue's GPU the calling thread's current device: CUDA codecs make their streams
  /// and launch their kernels there.
  Status make_current();
  /// Work enqueued after this waits until `event` (a cudaEvent_t, possibly opened from another
  /// process's IPC handle) has completed as last recorded.
  Status wait_for(void* event);
  Status synchronize();

  Status copy_to_host(void* host, const void* device, size_t bytes);
  Status copy_to_device(void* device, const void* host, size_t bytes);
  /// Device to device, also between GPUs (through peer access where the GPUs have it).
  Status copy_between(void* to, int to_device, const void* from, int from_device, size_t bytes);

  /// out = in (first) or out += in, element by element, `in` holding `n` values of `type`
  /// converted to fp32: called once per worker in local-rank order it makes the node sum as the
  /// host does. `in` and `out` on this queue's GPU.
  Status accumulate_fp32(const void* in, ElementType type, float* out, size_t n, bool first);
  /// out = values as `type` (round to nearest even for fp16 and bf16), `n` values.
  Status convert_from_fp32(const float* values, ElementType type, void* out, size_t n);
  /// out += the error-feedback residual of `stream` (a CUDA codec's stream on this GPU;
  /// stream.desc().elements values); nothing for a stream without one.
  Status fold_residual(const Stream& stream, float* out);

 private:
  DeviceQueue(int device, void* stream) : device_(device), stream_(stream) {}
  int device_;
  void* stream_;
};

}  // namespace gradgate::kernels
