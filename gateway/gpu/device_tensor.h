// The GPU side of one tensor whose local workers' buffers are GPU memory (CUDA IPC, see
// ingress.h): a CUDA stream (DeviceQueue) for the tensor's work, the node's fp32 sum in GPU
// memory, the node sum of the workers' buffers and the write-back of the aggregate, done there.
// The collective then runs on the GPU sum with a CUDA codec, frames staged through host memory
// (device_frame_staging.h). Results are the host path's bits: the same order of additions, the
// same conversions (local_reduce.h).
//
// Not thread-safe: the gateway uses it under its lock or from the tensor's step thread, one at a
// time.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "gateway/collective/tensor_streams.h"
#include "gateway/gpu/device_frame_staging.h"
#include "gateway/ingress/ingress.h"
#include "gradgate/kernels/device_ops.h"

namespace gradgate::gateway {

class DeviceTensor {
 public:
  /// For `elements` values on GPU `device`: its queue and node sum. kUnsupported in a build
  /// without CUDA, kUnavailable without a usable GPU, kResourceExhausted without the memory.
  static Result<std::unique_ptr<DeviceTensor>> create(int device, size_t elements);

  int device() const { return queue_->device(); }
  kernels::DeviceQueue& queue() { return *queue_; }
  /// The node sum in GPU memory: the collective's data.
  std::span<float> sum() const;
  /// How the collective moves this tensor's frames between the GPU and the host.
  FrameStaging& frame_staging() { return frame_staging_; }

  /// Waits for every present worker's ready event, then sums their buffers (local-rank order, as
  /// `dtype`) into sum(); buffers on another GPU are copied over first. Returns once the sum is
  /// there.
  Status reduce(std::span<const WorkerBuffer> buffers, Dtype dtype);
  /// Writes sum() into the buffers of the workers `to[rank]` names, in `dtype`, and returns once
  /// they hold it.
  Status write_back(std::span<const WorkerBuffer> buffers, const std::vector<bool>& to,
                    Dtype dtype);
  /// host = sum(), or sum() = host: the node sum staged for a codec that runs on the CPU.
  Status copy_sum_to_host(std::span<float> host);
  Status copy_sum_from_host(std::span<const float> host);
  /// sum() += every residual of `streams` (gateway `rank`'s, CUDA streams on this GPU) where its
  /// chunk lies: fold_residuals() of tensor_streams.h for device streams.
  Status fold_residuals(const TensorStreams& streams, uint32_t rank);

 private:
  DeviceTensor(std::unique_ptr<kernels::DeviceQueue> queue,
               std::unique_ptr<kernels::DeviceMemory> sum, size_t elements)
      : queue_(std::move(queue)),
        sum_(std::move(sum)),
        frame_staging_(*queue_),
        elements_(elements) {}
  /// The buffer as the sum's GPU reads it: itself, or a copy in staging when on another GPU.
  Result<const std::byte*> readable(const WorkerBuffer& buffer);
  /// reduce() and write_back() without waiting for the queue.
  Status enqueue_reduce(std::span<const WorkerBuffer> buffers, Dtype dtype);
  Status enqueue_write_back(std::span<const WorkerBuffer> buffers, const std::vector<bool>& to,
                            Dtype dtype);
  /// Waits for the queue, and returns `enqueued` if it failed, else the wait's status.
  Status finished(const Status& enqueued);

  std::unique_ptr<kernels::DeviceQueue> queue_;
  std::unique_ptr<kernels::DeviceMemory> sum_;
  std::unique_ptr<kernels::DeviceMemory> staging_;  // made on first use
  DeviceFrameStaging frame_staging_;
  size_t elements_;
};

}  // namespace gradgate::gateway
