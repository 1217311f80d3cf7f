// Host-side entry points of powersgd's CUDA kernels (powersgd_kernels.cu); the GEMMs are cuBLAS
// calls (powersgd_blas.h). Each enqueues its kernel on `stream` and returns the launch's Status.
// Host-only: compiles without nvcc.
//
// Matrices are row-major: M is rows x cols (the tensor's n elements, zero-padded), P and P_hat
// rows x rank, Q cols x rank, rank in [1, 64]. Pointers are device memory.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "launch.h"

namespace gradgate::kernels::cuda {

/// m[i] = g[i] (+ e[i]) for i < n, 0 for n <= i < padded; counts the NaN or infinite g in
/// count[0].
Status launch_powersgd_matrix(const float* g, const float* e, float* m, uint64_t n, uint64_t padded,
                              Tally* tally, cudaStream_t stream);

/// Writes a payload: the words rows and cols, then out_values[i] = a[i] (+ b[i]) for i < values
/// (a may be out_values itself), checksummed into `sink` (the body is the whole payload); counts
/// the NaN or infinite values written into *bad.
Status launch_powersgd_payload(const float* a, const float* b, uint32_t* payload, uint32_t rows,
                               uint32_t cols, uint64_t values, const CrcSink& sink,
                               unsigned long long* bad, cudaStream_t stream);

/// p_hat = p with orthonormal columns (powersgd::orthonormalise, one thread block); `w` holds
/// rows x rank doubles.
Status launch_powersgd_orthonormalise(const float* p, uint64_t rows, uint32_t rank, double* w,
                                      float* p_hat, cudaStream_t stream);

/// Every column of q scaled to unit norm, redrawn from `key` first where `redraw` or where it is
/// zero (powersgd::normalise_column, one thread block a column).
Status launch_powersgd_normalise_q(float* q, uint64_t cols, uint32_t rank, uint64_t key,
                                   bool redraw, cudaStream_t stream);

/// out[i] = base[i] -/+ (P Q^T)[i] (subtract or add; base may be null for 0, or out itself) for
/// i < n of the rows x cols product. With `skip_if_bad`, does nothing when that tally's count[0]
/// or count[1] is non-zero: the residual update of an encode that failed.
Status launch_powersgd_low_rank(const float* p, const float* q, uint64_t rows, uint64_t cols,
                                uint32_t rank, const float* base, float* out, uint64_t n,
                                bool subtract, const Tally* skip_if_bad, cudaStream_t stream);

}  // namespace gradgate::kernels::cuda
