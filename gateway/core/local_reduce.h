// The node-level part of the all-reduce: the sum of the local workers' buffers (fp32, fp16 or
// bf16) into one fp32 buffer, in local-rank order so that it is the same on every run, and the
// aggregate written back into each worker's buffer in the worker's dtype.
#pragma once

#include <span>

#include "gateway/ingress/ingress.h"

namespace gradgate::gateway {

/// sum = buffers[0] + buffers[1] + ... (converted to fp32). Every buffer holds sum.size() values
/// of `dtype`; null buffers (workers gone) are skipped.
void sum_worker_buffers(std::span<const WorkerBuffer> buffers, Dtype dtype, std::span<float> sum);

/// Writes `values` into `buffer` as `dtype` (round to nearest even for fp16 and bf16).
void write_worker_buffer(std::span<const float> values, Dtype dtype, WorkerBuffer buffer);

}  // namespace gradgate::gateway
