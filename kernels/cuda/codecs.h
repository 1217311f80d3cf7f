// Codec factories of the CUDA library, one per codec of the table; make_cuda_codec() picks one by
// CodecParams::id. cuda::make_topk_codec does not take overlap > 0 (make_cuda_codec refuses it).
#pragma once

#include "codec_factories.h"

namespace gradgate::kernels::cuda {

GRADGATE_CODEC_TABLE(GRADGATE_DECLARE_CODEC_FACTORY)

}  // namespace gradgate::kernels::cuda
