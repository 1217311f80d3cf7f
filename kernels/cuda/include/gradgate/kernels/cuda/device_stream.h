// The Stream of the CUDA codecs: the error-feedback residual of one gradient stream, kept in the
// memory of the device that was current when the codec made it (zeroed there), next to the
// gradients it corrects. Stream::residual() is empty for such a stream: read the residual on the
// device through device_residual(), or copy it to the host with copy_residual_to_host().
//
// Like every Stream, for one thread at a time; it owns its device memory and frees it when
// destroyed. Use it on the device it was made on.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/status.h"

namespace gradgate::kernels::cuda {

class DeviceStream final : public Stream {
 public:
  /// A stream for `desc`, with a zeroed residual of desc.elements floats in device memory when
  /// `with_residual`.
  static Result<std::unique_ptr<DeviceStream>> make(const TensorDesc& desc, bool with_residual);
  ~DeviceStream() override;

  /// The residual in device memory: desc().elements floats, or nullptr without a residual.
  float* device_residual() { return residual_; }
  const float* device_residual() const { return residual_; }
  bool has_residual() const { return residual_ != nullptr; }

  /// Bytes of device memory the stream holds.
  size_t memory_bytes() const override;

  /// Copies the residual into `out`, which must hold desc().elements floats (none without a
  /// residual). Synchronous.
  Status copy_residual_to_host(std::span<float> out) const;

 private:
  DeviceStream(const TensorDesc& desc, float* residual)
      : Stream(desc, false), residual_(residual) {}

  float* residual_;
};

/// The residual of any stream, host (CPU codecs) or device (CUDA codecs), as host values: empty
/// when the stream keeps none.
Result<std::vector<float>> residual_on_host(const Stream& stream);

}  // namespace gradgate::kernels::cuda
