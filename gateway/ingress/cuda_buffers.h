// DECLARE_CUDA's side of a session: the worker's GPU allocations, opened through CUDA IPC once
// each and shared by the session's tensors that lie in them, and the WorkerBuffer of each tensor
// (its address in the allocation, and its ready event, opened per tensor). Used by the ingress
// server's thread only. An allocation closes when the last WorkerBuffer copy that holds it goes:
// the session's list when the session ends, or an all-reduce still running then.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include "gateway/ingress/ingress.h"
#include "gradgate/ingress_protocol.h"

namespace gradgate::gateway {

/// One opened allocation; counted in the gauge it was opened with while it is open.
struct CudaAllocation;

/// A session's opened allocations, by the bytes of their cudaIpcMemHandle_t.
using CudaAllocations = std::map<std::array<std::byte, 64>, std::shared_ptr<const CudaAllocation>>;

/// The buffer of a tensor of `bytes` bytes that a worker declared at `where`: the GPU named by its
/// UUID, the allocation (taken from `opened`, or opened and added there, counted in
/// `open_count`), a range check against the allocation's size, and the ready event. Why not, as
/// a Status, when the GPU, the allocation or the event cannot be used.
Result<WorkerBuffer> map_cuda_buffer(const ingress_protocol::CudaBuffer& where, size_t bytes,
                                     CudaAllocations& opened,
                                     const std::shared_ptr<std::atomic<uint64_t>>& open_count);

/// Closes the allocations of `opened` that no WorkerBuffer holds any more (a tensor declared
/// again elsewhere, DDP's buckets reallocated).
void close_unused_allocations(CudaAllocations& opened);

}  // namespace gradgate::gateway
