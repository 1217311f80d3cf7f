// Opening another process's GPU memory and events through CUDA IPC, for the gateway's ingress: a
// worker passes the handles of the allocation that holds its gradient and of the event it records
// once the gradient is written; the gateway opens them here and works on the memory in place.
//
// Host C++ only (no CUDA types): the ingress compiles without nvcc. In a build without CUDA every
// call answers kUnsupported ("this gradgate was built without CUDA"). Devices are the gateway's
// CUDA ordinals; a GPU is named across processes by its UUID, as CUDA_VISIBLE_DEVICES may number
// it differently in the worker.
//
// A handle of memory may be opened once per process at a time (CUDA refuses a second
// cudaIpcOpenMemHandle of the same allocation): share one CudaIpcMemory among the tensors of an
// allocation. The objects close what they opened when destroyed, from any thread, leaving that
// thread's current device as it was; errors while closing are dropped (nothing is left to report
// them to). Each object may be used from any thread.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "gradgate/base/status.h"

namespace gradgate::kernels {

/// Ok when this process can open CUDA IPC handles; else why not: built without CUDA
/// (kUnsupported), no GPU or driver visible (kUnavailable).
Status cuda_ipc_available();

/// The ordinal of the visible GPU whose cudaDeviceProp::uuid is `uuid`; kNotFound if none is.
Result<int> cuda_device_of_uuid(std::span<const std::byte, 16> uuid);

/// One allocation of another process, opened on `device()` with cudaIpcOpenMemHandle
/// (cudaIpcMemLazyEnablePeerAccess). Closed with cudaIpcCloseMemHandle when destroyed.
class CudaIpcMemory {
 public:
  /// Takes over memory that cudaIpcOpenMemHandle opened (open_cuda_ipc_memory does both).
  CudaIpcMemory(std::byte* base, size_t bytes, int device)
      : base_(base), bytes_(bytes), device_(device) {}
  CudaIpcMemory(const CudaIpcMemory&) = delete;
  CudaIpcMemory& operator=(const CudaIpcMemory&) = delete;
  ~CudaIpcMemory();

  /// The allocation's first byte, a device address in this process.
  std::byte* base() const { return base_; }
  /// The allocation's size in bytes (cuMemGetAddressRange of the opened memory): a tensor at
  /// `offset` of `n` bytes fits when offset + n <= bytes().
  size_t bytes() const { return bytes_; }
  int device() const { return device_; }

 private:
  std::byte* base_;
  size_t bytes_;
  int device_;
};

/// Another process's event (created with cudaEventInterprocess | cudaEventDisableTiming), opened
/// with cudaIpcOpenEventHandle on `device()`. Destroyed with cudaEventDestroy.
class CudaIpcEvent {
 public:
  /// Takes over an event that cudaIpcOpenEventHandle opened (open_cuda_ipc_event does both).
  CudaIpcEvent(void* event, int device) : event_(event), device_(device) {}
  CudaIpcEvent(const CudaIpcEvent&) = delete;
  CudaIpcEvent& operator=(const CudaIpcEvent&) = delete;
  ~CudaIpcEvent();

  /// The cudaEvent_t, to wait for with cudaStreamWaitEvent or cudaEventSynchronize.
  void* event() const { return event_; }
  int device() const { return device_; }

 private:
  void* event_;
  int device_;
};

/// Opens the allocation of `handle` (a cudaIpcMemHandle_t) on `device`.
Result<std::shared_ptr<CudaIpcMemory>> open_cuda_ipc_memory(int device,
                                                            std::span<const std::byte, 64> handle);

/// Opens the event of `handle` (a cudaIpcEventHandle_t) on `device`.
Result<std::shared_ptr<CudaIpcEvent>> open_cuda_ipc_event(int device,
                                                          std::span<const std::byte, 64> handle);

}  // namespace gradgate::kernels
