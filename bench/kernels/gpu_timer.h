// Timing on a CUDA stream with events: the median of several runs after untimed warm-up runs, so
// that one slow run (a first-touch allocation, a clock ramp) does not move the result. Host-only.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

#include "gradgate/base/status.h"

namespace gradgate::bench {

/// Milliseconds between events recorded on `stream` before and after `op`: the median of `reps`
/// runs (at least one), after `warmup` untimed ones. `op` enqueues its work on `stream` (or waits
/// for it). The first error of `op` or of CUDA ends the timing.
Result<double> median_ms(cudaStream_t stream, int warmup, int reps,
                         const std::function<Status()>& op);

}  // namespace gradgate::bench
