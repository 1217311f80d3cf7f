#include "gradgate/kernels/cuda_ipc.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "cuda_check.h"

namespace gradgate::kernels {
namespace {

static_assert(sizeof(cudaIpcMemHandle_t) == 64 && sizeof(cudaIpcEventHandle_t) == 64);
static_assert(sizeof(cudaUUID_t) == 16);

/// For destructors: the error is turned into a Status (which clears it) and dropped.
void drop_error(cudaError_t error, const char* call) {
  (void)cuda::cuda_status(error, call, __FILE__, __LINE__);
}

/// Makes a device current until the scope ends, then restores the thread's previous device.
class DeviceScope {
 public:
  DeviceScope() = default;
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  ~DeviceScope() {
    if (entered_) drop_error(cudaSetDevice(previous_), "cudaSetDevice (restoring the device)");
  }

  Status enter(int device) {
    GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous_));
    GRADGATE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
    entered_ = true;
    return {};
  }

 private:
  int previous_ = 0;
  bool entered_ = false;
};

std::string uuid_text(std::span<const std::byte, 16> uuid) {
  char text[48];
  int at = std::snprintf(text, sizeof text, "GPU-");
  for (size_t i = 0; i < uuid.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text[at++] = '-';
    at += std::snprintf(text + at, sizeof text - static_cast<size_t>(at), "%02x",
                        static_cast<unsigned>(uuid[i]));
  }
  return std::string(text, static_cast<size_t>(at));
}

/// Bytes from `pointer` to the end of the allocation that holds it (cuMemGetAddressRange, reached
/// through the runtime so that nothing links the driver library).
Result<size_t> bytes_to_allocation_end(void* pointer) {
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &entry,
                                                                 3020, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || entry == nullptr) {
    return Status(ErrorCode::kUnavailable,
                  "the CUDA driver does not provide cuMemGetAddressRange (query result " +
                      std::to_string(static_cast<int>(found)) + ")");
  }
  const auto get_range = reinterpret_cast<PFN_cuMemGetAddressRange_v3020>(entry);
  const auto address = reinterpret_cast<CUdeviceptr_v2>(pointer);
  CUdeviceptr_v2 base = 0;
  size_t size = 0;
  if (const CUresult result = get_range(&base, &size, address); result != CUDA_SUCCESS) {
    return Status(ErrorCode::kInternal,
                  "cuMemGetAddressRange of the opened memory failed: CUresult " +
                      std::to_string(static_cast<int>(result)));
  }
  return size - static_cast<size_t>(address - base);
}

}  // namespace

Status cuda_ipc_available() {
  int count = 0;
  if (const cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess) {
    const Status status = cuda::cuda_status(error, "cudaGetDeviceCount", __FILE__, __LINE__);
    return Status(ErrorCode::kUnavailable, "no GPU is visible: " + status.message());
  }
  if (count == 0) return Status(ErrorCode::kUnavailable, "no GPU is visible");
  return {};
}

Result<int> cuda_device_of_uuid(std::span<const std::byte, 16> uuid) {
  int count = 0;
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  for (int device = 0; device < count; ++device) {
    cudaDeviceProp properties{};
    GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&properties, device));
    if (std::memcmp(properties.uuid.bytes, uuid.data(), uuid.size()) == 0) return device;
  }
  return Status(ErrorCode::kNotFound, "none of the " + std::to_string(count) +
                                          " GPUs visible here is " + uuid_text(uuid));
}

CudaIpcMemory::~CudaIpcMemory() {
  DeviceScope scope;
  if (Status entered = scope.enter(device_); !entered.ok()) return;
  drop_error(cudaIpcCloseMemHandle(base_), "cudaIpcCloseMemHandle");
}

CudaIpcEvent::~CudaIpcEvent() {
  DeviceScope scope;
  if (Status entered = scope.enter(device_); !entered.ok()) return;
  drop_error(cudaEventDestroy(static_cast<cudaEvent_t>(event_)), "cudaEventDestroy");
}

Result<std::shared_ptr<CudaIpcMemory>> open_cuda_ipc_memory(int device,
                                                            std::span<const std::byte, 64> handle) {
  DeviceScope scope;
  GRADGATE_RETURN_IF_ERROR(scope.enter(device));
  cudaIpcMemHandle_t ipc;
  std::memcpy(&ipc, handle.data(), sizeof ipc);
  void* base = nullptr;
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaIpcOpenMemHandle(&base, ipc, cudaIpcMemLazyEnablePeerAccess));
  const Result<size_t> bytes = bytes_to_allocation_end(base);
  if (!bytes.ok()) {
    drop_error(cudaIpcCloseMemHandle(base), "cudaIpcCloseMemHandle");
    return bytes.status();
  }
  return std::make_shared<CudaIpcMemory>(static_cast<std::byte*>(base), *bytes, device);
}

Result<std::shared_ptr<CudaIpcEvent>> open_cuda_ipc_event(int device,
                                                          std::span<const std::byte, 64> handle) {
  DeviceScope scope;
  GRADGATE_RETURN_IF_ERROR(scope.enter(device));
  cudaIpcEventHandle_t ipc;
  std::memcpy(&ipc, handle.data(), sizeof ipc);
  cudaEvent_t event = nullptr;
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaIpcOpenEventHandle(&event, ipc));
  return std::make_shared<CudaIpcEvent>(event, device);
}

}  // namespace gradgate::kernels
