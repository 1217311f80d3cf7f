#include "powersgd_blas.h"

#include <cublas_v2.h>

#include <memory>
#include <string>
#include <vector>

#include "cuda_check.h"

namespace gradgate::kernels::cuda::powersgd {
namespace {

struct HandleDestroy {
  void operator()(cublasHandle_t handle) const { cublasDestroy(handle); }
};
using Handle = std::unique_ptr<cublasContext, HandleDestroy>;

Status blas_status(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return {};
  const ErrorCode code =
      status == CUBLAS_STATUS_ALLOC_FAILED ? ErrorCode::kResourceExhausted : ErrorCode::kInternal;
  return Status(code, std::string(call) + " failed: " + cublasGetStatusString(status));
}

#define GRADGATE_CUBLAS_RETURN_IF_ERROR(call)                \
  do {                                                       \
    if (const cublasStatus_t gradgate_blas_status_ = (call); \
        gradgate_blas_status_ != CUBLAS_STATUS_SUCCESS) {    \
      return blas_status(gradgate_blas_status_, #call);      \
    }                                                        \
  } while (0)

/// The calling thread's handle for the current device, bound to `stream`.
Result<cublasHandle_t> handle_on(cudaStream_t stream) {
  thread_local std::vector<Handle> by_device;
  int device = 0;
  GRADGATE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  const auto index = static_cast<size_t>(device);
  if (index >= by_device.size()) by_device.resize(index + 1);
  if (!by_device[index]) {
    cublasHandle_t handle = nullptr;
    GRADGATE_CUBLAS_RETURN_IF_ERROR(cublasCreate(&handle));
    by_device[index].reset(handle);
  }
  cublasHandle_t handle = by_device[index].get();
  GRADGATE_CUBLAS_RETURN_IF_ERROR(cublasSetStream(handle, stream));
  return handle;
}

// cuBLAS is column-major: a row-major a x b matrix is its b x a transpose there. So the row-major
// products are computed as P^T = Q^T M^T and Q^T = P^T M, both C = A op(B) with A and C of
// leading dimension `rank` and B = M^T, of leading dimension cols.
Status gemm(cublasOperation_t op_b, uint64_t m, uint64_t n, uint64_t k, const float* a,
            const float* b, uint64_t ldb, float* c, cudaStream_t stream) {
  auto handle = handle_on(stream);
  if (!handle.ok()) return handle.status();
  const float one = 1.0f, zero = 0.0f;
  const auto lda = static_cast<int64_t>(m);
  GRADGATE_CUBLAS_RETURN_IF_ERROR(cublasSgemm_64(
      *handle, CUBLAS_OP_N, op_b, lda, static_cast<int64_t>(n), static_cast<int64_t>(k), &one, a,
      lda, b, static_cast<int64_t>(ldb), &zero, c, lda));
  return {};
}

}  // namespace

Status multiply_q(const float* m, const float* q, float* p, uint64_t rows, uint64_t cols,
                  uint32_t rank, cudaStream_t stream) {
  return gemm(CUBLAS_OP_N, rank, rows, cols, q, m, cols, p, stream);
}

Status multiply_p_transposed(const float* m, const float* p, float* q, uint64_t rows, uint64_t cols,
                             uint32_t rank, cudaStream_t stream) {
  return gemm(CUBLAS_OP_T, rank, cols, rows, p, m, cols, q, stream);
}

}  // namespace gradgate::kernels::cuda::powersgd
