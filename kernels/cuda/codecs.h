// Codec factories of the CUDA library; make_cuda_codec() picks one by CodecParams::id.
#pragma once

#include <memory>

#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"

namespace gradgate::kernels::cuda {

std::unique_ptr<Codec> make_none_codec(const CodecParams& params);
std::unique_ptr<Codec> make_half_codec(const CodecParams& params);  // fp16 and bf16
std::unique_ptr<Codec> make_qsgd_codec(const CodecParams& params);
std::unique_ptr<Codec> make_sign_codec(const CodecParams& params);
std::unique_ptr<Codec> make_powersgd_codec(const CodecParams& params);
std::unique_ptr<Codec> make_topk_codec(const CodecParams& params);  // not with overlap > 0
std::unique_ptr<Codec> make_randomk_codec(const CodecParams& params);

}  // namespace gradgate::kernels::cuda
