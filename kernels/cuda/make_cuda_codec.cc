#include <cuda_runtime_api.h>

#include <string>

#include "codecs.h"
#include "gradgate/kernels/codec_spec.h"

namespace gradgate::kernels {

Result<std::unique_ptr<Codec>> make_cuda_codec(const CodecParams& params) {
  GRADGATE_RETURN_IF_ERROR(validate_codec_params(params));
  if (static_cast<int>(params.id) >= kCodecCount) {
    return Status(ErrorCode::kInvalidArgument, "unknown codec id");
  }
  const std::string name(codec_name(params.id));
  int devices = 0;
  if (const cudaError_t error = cudaGetDeviceCount(&devices);
      error != cudaSuccess || devices == 0) {
    cudaGetLastError();
    return Status(ErrorCode::kUnsupported,
                  "codec " + name + " on device memory: no usable CUDA device (" +
                      (error != cudaSuccess ? cudaGetErrorString(error) : "none found") + ")");
  }
  switch (params.id) {
    case CodecId::kNone:
      return cuda::make_none_codec(params);
    case CodecId::kFp16:
    case CodecId::kBf16:
      return cuda::make_half_codec(params);
    case CodecId::kQsgd:
      return cuda::make_qsgd_codec(params);
    case CodecId::kSign:
      return cuda::make_sign_codec(params);
    case CodecId::kPowersgd:
      return cuda::make_powersgd_codec(params);
    case CodecId::kTopk:
      if (params.overlap == 0.0) return cuda::make_topk_codec(params);
      break;
    case CodecId::kRandomk:
      return cuda::make_randomk_codec(params);
  }
  return Status(ErrorCode::kUnsupported,
                "codec " + name + " has no CUDA implementation yet; encode from host memory");
}

}  // namespace gradgate::kernels
