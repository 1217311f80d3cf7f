// Codec factories of the CPU library, one per codec of the table; make_cpu_codec() picks one by
// CodecParams::id.
#pragma once

#include "codec_factories.h"
#include "cpu_codec.h"

namespace gradgate::kernels::cpu {

GRADGATE_CODEC_TABLE(GRADGATE_DECLARE_CODEC_FACTORY)

}  // namespace gradgate::kernels::cpu
