// powersgd's two GEMMs, P = M Q and Q = M^T P, through cuBLAS (fp32, no tensor-core rounding),
// with one cuBLAS handle per thread and device, made on first use and kept for the thread's life.
// Matrices are row-major in device memory: M rows x cols, P rows x rank, Q cols x rank. Each call
// enqueues its GEMM on `stream` and returns without waiting. Host-only: compiles without nvcc.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gradgate/base/status.h"

namespace gradgate::kernels::cuda::powersgd {

/// p = m q.
Status multiply_q(const float* m, const float* q, float* p, uint64_t rows, uint64_t cols,
                  uint32_t rank, cudaStream_t stream);

/// q = m^T p.
Status multiply_p_transposed(const float* m, const float* p, float* q, uint64_t rows, uint64_t cols,
                             uint32_t rank, cudaStream_t stream);

}  // namespace gradgate::kernels::cuda::powersgd
