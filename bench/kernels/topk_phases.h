// Where the time of a top-k selection goes on the GPU, to find what keeps it from the memory
// roofline: the streaming pass alone (e += g and the statistics, nothing collected), the same pass
// collecting the candidates above the stream's warm-started threshold, and the whole selection
// (the pass, the radix select among the candidates and keep). Each is timed the way
// the encode is, on the stream of an encoder that has already run its warm-up steps, so the
// threshold is the steady state's. Host-only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "gradgate/base/status.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"

namespace gradgate::bench {

/// Milliseconds, medians of `reps` runs after `warmup` ones.
struct TopkPhaseTimes {
  double pass_ms = 0;       // the first pass with nothing above its threshold
  double collect_ms = 0;    // the first pass collecting the candidates above the steady threshold
  double selection_ms = 0;  // the whole selection: pass, radix select, keep
};

/// Times the phases of `params` (a topk spec) on the `n` values at `grad` with `stream`, a CUDA
/// topk stream that has encoded `grad` before. Without error feedback the passes only read `grad`
/// and nothing is changed but the stream's warm start; with it, the residual takes the gradient
/// once per run.
Result<TopkPhaseTimes> time_topk_phases(const kernels::CodecParams& params, const float* grad,
                                        size_t n, kernels::Stream& stream, cudaStream_t cuda,
                                        int warmup, int reps);

}  // namespace gradgate::bench
