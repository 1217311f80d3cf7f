#include "gradgate/kernels/make_codec_for.h"

#include "gradgate/kernels/cuda_codecs.h"

namespace gradgate::kernels {

Result<std::unique_ptr<Codec>> make_codec_for(const CodecParams& params, MemoryKind memory) {
  return memory == MemoryKind::kDevice ? make_cuda_codec(params) : make_cpu_codec(params);
}

}  // namespace gradgate::kernels
