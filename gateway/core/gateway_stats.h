// What the core counts, for logs and metrics (Gateway::stats()).
#pragma once

#include <cstdint>

#include "gateway/core/step_runner.h"

namespace gradgate::gateway {

/// Counters of the core, for logs and metrics.
struct GatewayStats : StepCounters {
  uint64_t residual_bytes = 0;          // gauge: codec stream memory
  uint32_t tensors = 0;                 // gauge
  uint32_t workers = 0;                 // gauge: local workers connected
  uint32_t policy_version = 0;          // gauge: the newest policy version received
  uint32_t applied_policy_version = 0;  // gauge: the newest version a step has run under
  uint32_t gpu_tensors_on_gpu = 0;      // gauge: tensors in GPU memory whose codec runs there
  uint32_t gpu_tensors_on_cpu = 0;      // gauge: tensors in GPU memory whose codec runs on the CPU
  uint64_t step_threads = 0;            // gauge: threads the steps run on (StepThreads)
  uint32_t tensors_off_policy = 0;      // gauge: tensors keeping a codec their policy did not name
};

}  // namespace gradgate::gateway
