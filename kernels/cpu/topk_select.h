// Top-k selection with error feedback, the core of the topk codec.
//
// One fused pass adds the gradient into the residual, collects every element above a candidate
// threshold (warm-started from the previous step's threshold of the same stream plus its drift,
// less a safety margin for how much the drift varies, aimed at 1.5 k candidates) and clears them
// in the residual; the final threshold is
// then found among the candidates only. The candidates not selected are not written back at once
// (a scatter over the whole array, ~15% of the step): they are kept aside as pending fixes that
// the next step's pass applies as it goes by; apply_pending() applies them earlier, for whoever
// reads e in between. In steady state this touches memory once (read g, read and write e: 12
// bytes per element).
// Cold steps and big distribution shifts add read-only rescans of e (4 bytes per element each),
// counted in Selection::passes.
//
// Threshold mode (Chen, Liu, Han 2021): the candidate threshold comes from a Laplace fit
// (P(|v| > t) = exp(-t / b), b = mean |v|) and is corrected by counting until the candidate count
// is in [k, 8k + 1024], steered as by the CUDA codec (gradgate/kernels/topk_steering.h); among
// the candidates a 4096-bin histogram of |v| (plus bisection inside
// one bin when it is crowded) lands the count in [k, floor(1.1 k)]. Exact mode takes exactly the k
// largest |v| (std::nth_element on the candidates). Ties that make [k, 1.1k] unreachable fall back
// to exact selection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "gradgate/base/status.h"
#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/topk_steering.h"

namespace gradgate::kernels::cpu {

/// Per-stream selector state: the warm start and the candidate buffers (reused every step).
struct TopkSelectorState : topk::WarmStart {
  std::vector<uint32_t> indices;
  std::vector<float> values;
  // e is short of these additions (ascending indices): e[pending_indices[j]] += pending_values[j]
  // for j < pending_count, applied by the next select_topk or by apply_pending.
  std::vector<uint32_t> pending_indices;
  std::vector<float> pending_values;
  size_t pending_count = 0;

  size_t memory_bytes() const {
    return (indices.capacity() + pending_indices.capacity()) * sizeof(uint32_t) +
           (values.capacity() + pending_values.capacity()) * sizeof(float);
  }
};

struct Selection {
  std::span<const uint32_t> indices;  // ascending
  std::span<const float> values;      // the values at those indices (e is now 0 there)
  int passes = 0;                     // passes over the n-element arrays (1 in steady state)
  float threshold = 0.0f;
};

/// k for a density over n elements: round(density * n), at least 1, at most n.
size_t topk_count(double density, size_t n);
/// The most elements threshold mode may select for a target k: floor(1.1 k).
size_t topk_max_count(size_t k);

/// e += g, then selects the elements of e to send and sets them to zero in e (when e is empty,
/// selects from g and writes nothing). Returns kNonFiniteGradient (and leaves e as it was, to float
/// rounding) if g + e has NaN or infinite values. The returned spans point into `state` and stay
/// valid until the next call. Afterwards e is exact only once the state's pending fixes are
/// applied (by the next call with the same e and state, or by apply_pending).
Result<Selection> select_topk(std::span<const float> g, std::span<float> e, size_t k,
                              TopkSelect mode, TopkSelectorState& state);

/// Applies the state's pending fixes to e now, making it the exact residual.
void apply_pending(TopkSelectorState& state, std::span<float> e);

}  // namespace gradgate::kernels::cpu
