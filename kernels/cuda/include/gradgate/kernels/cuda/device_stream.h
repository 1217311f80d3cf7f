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
#include <utility>
#include <vector>

#include "gradgate/base/status.h"
#include "gradgate/kernels/codec.h"

namespace gradgate::kernels::cuda {

/// What a codec keeps per stream beyond the residual (warm-start thresholds, candidate buffers,
/// low-rank factors), owned by the stream. Its device memory counts in memory_bytes().
class DeviceCodecState {
 public:
  virtual ~DeviceCodecState() = default;
  virtual size_t memory_bytes() const = 0;
};

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

  /// The codec's own state: nullptr until the codec sets it (on its first encode, typically).
  /// The codec that made the stream is the only one that reads or writes it.
  DeviceCodecState* codec_state() const { return codec_state_.get(); }
  void set_codec_state(std::unique_ptr<DeviceCodecState> state) { codec_state_ = std::move(state); }

  /// Passes over the n-element arrays (gradient, residual) that the last encode made: 1 for a
  /// fused streaming encode, more for codecs that rescan. For benchmarks and tests.
  int last_encode_passes() const { return last_encode_passes_; }
  void set_last_encode_passes(int passes) { last_encode_passes_ = passes; }

  /// Bytes of device memory the stream holds: the residual and the codec's state.
  size_t memory_bytes() const override;

  /// Copies the residual into `out`, which must hold desc().elements floats (none without a
  /// residual). Synchronous.
  Status copy_residual_to_host(std::span<float> out) const;

 private:
  DeviceStream(const TensorDesc& desc, float* residual)
      : Stream(desc, false), residual_(residual) {}

  float* residual_;
  std::unique_ptr<DeviceCodecState> codec_state_;
  int last_encode_passes_ = 0;
};

/// The residual of any stream, host (CPU codecs) or device (CUDA codecs), as host values: empty
/// when the stream keeps none.
Result<std::vector<float>> residual_on_host(const Stream& stream);

}  // namespace gradgate::kernels::cuda
