// The factory of the CUDA codecs, declared beside the other device operations: kernels/cuda
// implements it, and a build without CUDA implements it with kUnsupported (kernels/unavailable).
#pragma once

#include <memory>

#include "gradgate/base/status.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"

namespace gradgate::kernels {

/// Makes the CUDA implementation of the codec: it encodes and decodes device memory, on the
/// device current when its streams are made. kUnsupported when this build has no CUDA, when no
/// CUDA device is usable, and for topk with overlap > 0 (no CUDA implementation yet).
Result<std::unique_ptr<Codec>> make_cuda_codec(const CodecParams& params);

}  // namespace gradgate::kernels
