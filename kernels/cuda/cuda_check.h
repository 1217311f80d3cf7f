// The one check for CUDA runtime calls: turns a cudaError_t into our Status, so CUDA failures
// travel the data path as error values like every other failure.
#pragma once

#include <cuda_runtime_api.h>

#include "gradgate/base/status.h"

namespace gradgate::kernels::cuda {

/// The Status of `error`, returned by `call` at file:line: ok for cudaSuccess; otherwise the CUDA
/// error's name and text, as kResourceExhausted for an allocation failure, kUnavailable when no
/// usable device or driver is present, kInternal for the rest. Clears the runtime's last error so
/// that the next check does not report it again (an error that poisons the context stays).
Status cuda_status(cudaError_t error, const char* call, const char* file, int line);

}  // namespace gradgate::kernels::cuda

/// Returns the Status of the CUDA runtime call `call` from the enclosing function when it fails.
#define GRADGATE_CUDA_RETURN_IF_ERROR(call)                                                \
  do {                                                                                     \
    const cudaError_t gradgate_cuda_error_ = (call);                                       \
    if (gradgate_cuda_error_ != cudaSuccess) {                                             \
      return ::gradgate::kernels::cuda::cuda_status(gradgate_cuda_error_, #call, __FILE__, \
                                                    __LINE__);                             \
    }                                                                                      \
  } while (0)
