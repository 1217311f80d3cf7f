#include "cuda_check.h"

#include <string>
#include <string_view>

namespace gradgate::kernels::cuda {

Status cuda_status(cudaError_t error, const char* call, const char* file, int line) {
  if (error == cudaSuccess) return {};
  cudaGetLastError();  // clears the error unless it is sticky
  ErrorCode code = ErrorCode::kInternal;
  if (error == cudaErrorMemoryAllocation) {
    code = ErrorCode::kResourceExhausted;
  } else if (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver) {
    code = ErrorCode::kUnavailable;
  }
  const std::string_view path(file);
  const std::string_view base = path.substr(path.find_last_of('/') + 1);
  return Status(code, std::string(call) + " failed at " + std::string(base) + ":" +
                          std::to_string(line) + ": " + cudaGetErrorName(error) + ": " +
                          cudaGetErrorString(error));
}

}  // namespace gradgate::kernels::cuda
