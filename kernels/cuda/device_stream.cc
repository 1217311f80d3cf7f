#include "gradgate/kernels/cuda/device_stream.h"

#include <string>

#include "cuda_check.h"
#include "device_memory.h"

namespace gradgate::kernels::cuda {

Result<std::unique_ptr<DeviceStream>> DeviceStream::make(const TensorDesc& desc,
                                                         bool with_residual) {
  if (!with_residual) return std::unique_ptr<DeviceStream>(new DeviceStream(desc, nullptr));
  auto residual = device_alloc<float>(desc.elements);
  if (!residual.ok()) return residual.status();
  // Zeroed before any stream, blocking or not, can use it.
  GRADGATE_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(residual->get(), 0, desc.elements * sizeof(float), cudaStreamPerThread));
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(cudaStreamPerThread));
  return std::unique_ptr<DeviceStream>(new DeviceStream(desc, residual->release()));
}

DeviceStream::~DeviceStream() { DeviceFree{}(residual_); }

size_t DeviceStream::memory_bytes() const {
  return (residual_ ? desc().elements * sizeof(float) : 0) +
         (codec_state_ ? codec_state_->memory_bytes() : 0);
}

Status DeviceStream::copy_residual_to_host(std::span<float> out) const {
  const size_t elements = residual_ ? desc().elements : 0;
  if (out.size() != elements) {
    return Status(ErrorCode::kInvalidArgument, "residual of " + std::to_string(elements) +
                                                   " values does not fit an output of " +
                                                   std::to_string(out.size()));
  }
  if (elements == 0) return {};
  GRADGATE_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(out.data(), residual_, elements * sizeof(float), cudaMemcpyDeviceToHost));
  return {};
}

Result<std::vector<float>> residual_on_host(const Stream& stream) {
  const auto* device = dynamic_cast<const DeviceStream*>(&stream);
  if (!device) {
    const auto residual = stream.residual();
    return std::vector<float>(residual.begin(), residual.end());
  }
  std::vector<float> out(device->has_residual() ? device->desc().elements : 0);
  GRADGATE_RETURN_IF_ERROR(device->copy_residual_to_host(out));
  return out;
}

}  // namespace gradgate::kernels::cuda
