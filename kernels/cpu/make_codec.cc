#include "codecs.h"
#include "gradgate/kernels/codec_spec.h"

namespace gradgate::kernels {

Result<std::unique_ptr<Codec>> make_cpu_codec(const CodecParams& params) {
  GRADGATE_RETURN_IF_ERROR(validate_codec_params(params));
  switch (params.id) {
    case CodecId::kNone:
      return cpu::make_none_codec(params);
    case CodecId::kFp16:
    case CodecId::kBf16:
      return cpu::make_half_codec(params);
    case CodecId::kQsgd:
      return cpu::make_qsgd_codec(params);
    case CodecId::kSign:
      return cpu::make_sign_codec(params);
    case CodecId::kTopk:
      return cpu::make_topk_codec(params);
    case CodecId::kRandomk:
      return cpu::make_randomk_codec(params);
    case CodecId::kPowersgd:
      return cpu::make_powersgd_codec(params);
  }
  return Status(ErrorCode::kInvalidArgument, "unknown codec id");
}

}  // namespace gradgate::kernels
