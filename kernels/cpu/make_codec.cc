#include "codecs.h"
#include "gradgate/kernels/codec_spec.h"

namespace gradgate::kernels {

Result<std::unique_ptr<Codec>> make_cpu_codec(const CodecParams& params) {
  GRADGATE_RETURN_IF_ERROR(validate_codec_params(params));
  switch (params.id) {
#define GRADGATE_CPU_CODEC_CASE(enumerator, id, name, c_suffix, factory, ...) \
  case CodecId::enumerator:                                                   \
    return cpu::make_##factory##_codec(params);
    GRADGATE_CODEC_TABLE(GRADGATE_CPU_CODEC_CASE)
#undef GRADGATE_CPU_CODEC_CASE
  }
  return Status(ErrorCode::kInvalidArgument, "unknown codec id");
}

}  // namespace gradgate::kernels
