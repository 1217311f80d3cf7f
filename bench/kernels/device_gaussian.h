// The benchmark's gaussian gradient (gaussian.h), generated in device memory. Host-only: compiles
// without nvcc.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gradgate/base/status.h"

namespace gradgate::bench {

/// Enqueues on `stream` the writing of the first `n` values of the gaussian tensor of `seed` into
/// `out` (device memory).
Status fill_gaussian(float* out, size_t n, uint64_t seed, cudaStream_t stream);

}  // namespace gradgate::bench
