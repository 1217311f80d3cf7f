#include <cuda_runtime_api.h>

#include <string>

#include "codecs.h"
#include "gradgate/kernels/cuda_codecs.h"

namespace gradgate::kernels {

Result<std::unique_ptr<Codec>> make_cuda_codec(const CodecParams& params) {
  GRADGATE_RETURN_IF_ERROR(validate_codec_params(params));
  if (!is_codec_id(static_cast<unsigned>(params.id))) {
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
#define GRADGATE_CUDA_CODEC_CASE(enumerator, id, name, c_suffix, factory, ...) \
  case CodecId::enumerator:                                                    \
    return cuda::make_##factory##_codec(params);
    GRADGATE_CODEC_TABLE(GRADGATE_CUDA_CODEC_CASE)
#undef GRADGATE_CUDA_CODEC_CASE
  }
  return Status(ErrorCode::kInvalidArgument, "unknown codec id");
}

}  // namespace gradgate::kernels
