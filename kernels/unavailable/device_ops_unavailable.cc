// kernels::DeviceMemory and kernels::DeviceQueue for builds without CUDA: nothing can be made, so
// callers that try get a clear kUnsupported and keep to the host path.
#include "gradgate/kernels/device_ops.h"

namespace gradgate::kernels {
namespace {

Status no_cuda() {
  return Status(ErrorCode::kUnsupported, "GPU memory: this build of gradgate has no CUDA support");
}

}  // namespace

Result<std::unique_ptr<DeviceMemory>> DeviceMemory::allocate(int, size_t) { return no_cuda(); }
Result<std::unique_ptr<DeviceMemory>> DeviceMemory::allocate_pinned_host(int, size_t) {
  return no_cuda();
}
DeviceMemory::~DeviceMemory() = default;

Result<std::unique_ptr<DeviceQueue>> DeviceQueue::create(int) { return no_cuda(); }
DeviceQueue::~DeviceQueue() = default;
Status DeviceQueue::make_current() { return no_cuda(); }
Status DeviceQueue::wait_for(void*) { return no_cuda(); }
Status DeviceQueue::synchronize() { return no_cuda(); }
Status DeviceQueue::copy_to_host(void*, const void*, size_t) { return no_cuda(); }
Status DeviceQueue::copy_to_device(void*, const void*, size_t) { return no_cuda(); }
Status DeviceQueue::copy_between(void*, int, const void*, int, size_t) { return no_cuda(); }
Status DeviceQueue::accumulate_fp32(const void*, ElementType, float*, size_t, bool) {
  return no_cuda();
}
Status DeviceQueue::convert_from_fp32(const float*, ElementType, void*, size_t) {
  return no_cuda();
}
Status DeviceQueue::fold_residual(const Stream&, float*) { return no_cuda(); }

}  // namespace gradgate::kernels
