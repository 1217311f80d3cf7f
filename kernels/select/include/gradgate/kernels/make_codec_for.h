// Picking a codec's implementation by where its buffers live. Above both the CPU codecs
// (gradgate::kernels) and the device implementation (gradgate::device: the CUDA codecs, or the
// build without CUDA's kUnsupported), so that neither library depends on the other.
#pragma once

#include <memory>

#include "gradgate/base/status.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"

namespace gradgate::kernels {

/// The implementation for buffers in `memory`: the CPU codec for kHost and kPinned, the CUDA codec
/// for kDevice (with make_cuda_codec's errors).
Result<std::unique_ptr<Codec>> make_codec_for(const CodecParams& params, MemoryKind memory);

}  // namespace gradgate::kernels
