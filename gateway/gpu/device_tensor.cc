#include "gateway/gpu/device_tensor.h"

#include "gateway/gpu/reserved_memory.h"

namespace gradgate::gateway {
namespace {

kernels::ElementType element_type(Dtype dtype) {
  return static_cast<kernels::ElementType>(static_cast<uint8_t>(dtype));
}

}  // namespace

Result<std::unique_ptr<DeviceTensor>> DeviceTensor::create(int device, size_t elements) {
  auto queue = kernels::DeviceQueue::create(device);
  if (!queue.ok()) return queue.status();
  auto sum = kernels::DeviceMemory::allocate(device, elements * sizeof(float));
  if (!sum.ok()) return sum.status();
  return std::unique_ptr<DeviceTensor>(
      new DeviceTensor(std::move(queue).value(), std::move(sum).value(), elements));
}

std::span<float> DeviceTensor::sum() const {
  return {reinterpret_cast<float*>(sum_->data()), elements_};
}

Result<const std::byte*> DeviceTensor::readable(const WorkerBuffer& buffer) {
  if (buffer.cuda_device == device()) return buffer.data;
  auto copy = reserve(staging_, device(), buffer.bytes);
  if (!copy.ok()) return copy.status();
  GRADGATE_RETURN_IF_ERROR(
      queue_->copy_between(*copy, device(), buffer.data, buffer.cuda_device, buffer.bytes));
  return *copy;
}

Status DeviceTensor::enqueue_reduce(std::span<const WorkerBuffer> buffers, Dtype dtype) {
  bool first = true;
  for (const WorkerBuffer& buffer : buffers) {
    if (buffer.data == nullptr) continue;
    if (buffer.ready_event != nullptr)
      GRADGATE_RETURN_IF_ERROR(queue_->wait_for(buffer.ready_event));
    auto in = readable(buffer);
    if (!in.ok()) return in.status();
    GRADGATE_RETURN_IF_ERROR(
        queue_->accumulate_fp32(*in, element_type(dtype), sum().data(), elements_, first));
    first = false;
  }
  if (first) {
    return Status(ErrorCode::kAborted, "no local worker's buffer is left to reduce");
  }
  return {};
}

Status DeviceTensor::reduce(std::span<const WorkerBuffer> buffers, Dtype dtype) {
  return finished(enqueue_reduce(buffers, dtype));
}

Status DeviceTensor::enqueue_write_back(std::span<const WorkerBuffer> buffers,
                                        const std::vector<bool>& to, Dtype dtype) {
  for (size_t rank = 0; rank < buffers.size(); ++rank) {
    const WorkerBuffer& buffer = buffers[rank];
    if (!to[rank] || buffer.data == nullptr) continue;
    if (buffer.cuda_device == device()) {
      GRADGATE_RETURN_IF_ERROR(
          queue_->convert_from_fp32(sum().data(), element_type(dtype), buffer.data, elements_));
      continue;
    }
    // Converted here, then copied to the worker's GPU.
    auto converted = reserve(staging_, device(), buffer.bytes);
    if (!converted.ok()) return converted.status();
    GRADGATE_RETURN_IF_ERROR(
        queue_->convert_from_fp32(sum().data(), element_type(dtype), *converted, elements_));
    GRADGATE_RETURN_IF_ERROR(
        queue_->copy_between(buffer.data, buffer.cuda_device, *converted, device(), buffer.bytes));
  }
  return {};
}

Status DeviceTensor::write_back(std::span<const WorkerBuffer> buffers, const std::vector<bool>& to,
                                Dtype dtype) {
  return finished(enqueue_write_back(buffers, to, dtype));
}

Status DeviceTensor::finished(const Status& enqueued) {
  // Also after a failure: what was enqueued may still read or write the workers' buffers, which
  // the caller may give back (or a leaving worker unmap) once this returns.
  Status done = queue_->synchronize();
  return enqueued.ok() ? done : enqueued;
}

Status DeviceTensor::copy_sum_to_host(std::span<float> host) {
  GRADGATE_RETURN_IF_ERROR(queue_->copy_to_host(host.data(), sum().data(), host.size_bytes()));
  return queue_->synchronize();
}

Status DeviceTensor::copy_sum_from_host(std::span<const float> host) {
  GRADGATE_RETURN_IF_ERROR(queue_->copy_to_device(sum().data(), host.data(), host.size_bytes()));
  return queue_->synchronize();
}

Status DeviceTensor::fold_residuals(const TensorStreams& streams, uint32_t rank) {
  GRADGATE_RETURN_IF_ERROR(queue_->make_current());
  GRADGATE_RETURN_IF_ERROR(
      for_each_residual(streams, rank, [this](const kernels::Stream& stream, size_t offset) {
        return queue_->fold_residual(stream, sum().data() + offset);
      }));
  return queue_->synchronize();
}

}  // namespace gradgate::gateway
