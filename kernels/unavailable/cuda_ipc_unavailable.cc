// CUDA IPC for builds without CUDA: every call answers kUnsupported, so the ingress links and
// tells workers that this gateway cannot map their GPU memory.
#include "gradgate/kernels/cuda_ipc.h"

namespace gradgate::kernels {
namespace {

Status without_cuda() {
  return Status(ErrorCode::kUnsupported, "this gradgate was built without CUDA");
}

}  // namespace

Status cuda_ipc_available() { return without_cuda(); }

Result<int> cuda_device_of_uuid(std::span<const std::byte, 16>) { return without_cuda(); }

// Never made in this build: no open_ function succeeds.
CudaIpcMemory::~CudaIpcMemory() = default;
CudaIpcEvent::~CudaIpcEvent() = default;

Result<std::shared_ptr<CudaIpcMemory>> open_cuda_ipc_memory(int, std::span<const std::byte, 64>) {
  return without_cuda();
}

Result<std::shared_ptr<CudaIpcEvent>> open_cuda_ipc_event(int, std::span<const std::byte, 64>) {
  return without_cuda();
}

}  // namespace gradgate::kernels
