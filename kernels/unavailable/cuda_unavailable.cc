// make_cuda_codec for builds without CUDA: every request gets a clear kUnsupported, so callers
// that pick a codec by memory kind link and fail politely.
#include <string>

#include "gradgate/kernels/cuda_codecs.h"

namespace gradgate::kernels {

Result<std::unique_ptr<Codec>> make_cuda_codec(const CodecParams& params) {
  GRADGATE_RETURN_IF_ERROR(validate_codec_params(params));
  return Status(ErrorCode::kUnsupported,
                "codec " + std::string(codec_name(params.id)) +
                    " on device memory: this build of gradgate has no CUDA support");
}

}  // namespace gradgate::kernels
