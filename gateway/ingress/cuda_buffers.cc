#include "gateway/ingress/cuda_buffers.h"

#include <string>

#include "gradgate/kernels/cuda_ipc.h"

namespace gradgate::gateway {

struct CudaAllocation {
  CudaAllocation(std::shared_ptr<kernels::CudaIpcMemory> opened,
                 std::shared_ptr<std::atomic<uint64_t>> count)
      : memory(std::move(opened)), open_count(std::move(count)) {
    ++*open_count;
  }
  CudaAllocation(const CudaAllocation&) = delete;
  CudaAllocation& operator=(const CudaAllocation&) = delete;
  ~CudaAllocation() { --*open_count; }

  std::shared_ptr<kernels::CudaIpcMemory> memory;
  std::shared_ptr<std::atomic<uint64_t>> open_count;
};

namespace {

/// What a tensor's WorkerBuffer keeps open: its allocation and its ready event.
struct CudaTensorMapping {
  std::shared_ptr<const CudaAllocation> allocation;
  std::shared_ptr<kernels::CudaIpcEvent> event;
};

}  // namespace

Result<WorkerBuffer> map_cuda_buffer(const ingress_protocol::CudaBuffer& where, size_t bytes,
                                     CudaAllocations& opened,
                                     const std::shared_ptr<std::atomic<uint64_t>>& open_count) {
  const Result<int> device = kernels::cuda_device_of_uuid(where.device_uuid);
  if (!device.ok()) return device.status();

  std::shared_ptr<const CudaAllocation> allocation;
  if (auto it = opened.find(where.memory_handle); it != opened.end()) {
    allocation = it->second;
    if (allocation->memory->device() != *device) {
      return Status(ErrorCode::kInvalidArgument, "the allocation is open on GPU " +
                                                     std::to_string(allocation->memory->device()) +
                                                     " but the tensor names GPU " +
                                                     std::to_string(*device));
    }
  } else {
    auto memory = kernels::open_cuda_ipc_memory(*device, where.memory_handle);
    if (!memory.ok()) return memory.status();
    allocation = std::make_shared<const CudaAllocation>(std::move(memory).value(), open_count);
  }
  const size_t capacity = allocation->memory->bytes();
  if (where.offset > capacity || bytes > capacity - where.offset) {
    return Status(ErrorCode::kInvalidArgument,
                  "the tensor's " + std::to_string(bytes) + " bytes at offset " +
                      std::to_string(where.offset) + " do not fit in its allocation of " +
                      std::to_string(capacity) + " bytes");
  }
  auto event = kernels::open_cuda_ipc_event(*device, where.ready_event_handle);
  if (!event.ok()) return event.status();
  opened.emplace(where.memory_handle, allocation);

  WorkerBuffer buffer;
  buffer.data = allocation->memory->base() + where.offset;
  buffer.bytes = bytes;
  buffer.memory = kernels::MemoryKind::kDevice;
  buffer.cuda_device = *device;
  buffer.ready_event = event.value()->event();
  buffer.mapping = std::make_shared<const CudaTensorMapping>(
      CudaTensorMapping{std::move(allocation), std::move(event).value()});
  return buffer;
}

void close_unused_allocations(CudaAllocations& opened) {
  std::erase_if(opened, [](const auto& entry) { return entry.second.use_count() == 1; });
}

}  // namespace gradgate::gateway
