// The base of the CPU codecs: CodecBase on host and pinned memory, with streams whose residual is
// host memory; and StreamWith, for codecs that keep more state than a residual.
#pragma once

#include <memory>

#include "codec_base.h"

namespace gradgate::kernels::cpu {

class CpuCodec : public CodecBase {
 public:
  explicit CpuCodec(const CodecParams& params) : CodecBase(params, /*device=*/false) {}

  /// A Stream with a residual when the codec is lossy and error feedback is on.
  Result<std::unique_ptr<Stream>> make_stream(const TensorDesc& desc) const override {
    GRADGATE_RETURN_IF_ERROR(check_tensor(desc));
    return std::unique_ptr<Stream>(std::make_unique<Stream>(desc, keeps_residual()));
  }
};

/// Stream with an extra typed state block, for codecs that keep more than a residual.
template <typename State>
class StreamWith : public Stream {
 public:
  StreamWith(const TensorDesc& desc, bool with_residual) : Stream(desc, with_residual) {}
  State state;
  size_t memory_bytes() const override { return Stream::memory_bytes() + state.memory_bytes(); }
};

}  // namespace gradgate::kernels::cpu
