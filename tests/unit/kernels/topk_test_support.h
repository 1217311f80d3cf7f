// Helpers of the top-k selection tests (topk_test.cc, topk_degenerate_test.cc): the instruction
// set a test runs on, and the checks that every selection must pass.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "gradgate/kernels/half.h"
#include "loops.h"
#include "topk_select.h"

namespace gradgate::kernels::cpu::topk_test {

inline constexpr double kDensities[] = {0.1, 0.01, 0.001};

inline std::string isa_name(Isa isa) { return isa == Isa::kAvx2 ? "avx2" : "baseline"; }

// Forces an instruction set for the scope; restores the best one afterwards.
class ScopedIsa {
 public:
  explicit ScopedIsa(Isa isa) { force_isa(isa); }
  ~ScopedIsa() { force_isa(best_isa()); }
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;
};

inline bool isa_available(Isa isa) { return isa == Isa::kBaseline || best_isa() == Isa::kAvx2; }

inline size_t count_nonzero(std::span<const float> v) {
  return static_cast<size_t>(std::count_if(v.begin(), v.end(), [](float x) { return x != 0.0f; }));
}

// Indices strictly ascending and in range, values equal to v there, and every selected |v| at
// least every unselected |v| (a top set: nothing left out is larger than something taken).
inline testing::AssertionResult is_top_selection(const Selection& sel, std::span<const float> v) {
  if (sel.indices.size() != sel.values.size()) {
    return testing::AssertionFailure()
           << sel.indices.size() << " indices but " << sel.values.size() << " values";
  }
  std::vector<bool> taken(v.size(), false);
  float min_taken = std::numeric_limits<float>::infinity();
  for (size_t j = 0; j < sel.indices.size(); ++j) {
    const uint32_t i = sel.indices[j];
    if (i >= v.size()) return testing::AssertionFailure() << "index " << i << " out of range";
    if (j > 0 && i <= sel.indices[j - 1]) {
      return testing::AssertionFailure() << "indices not strictly ascending at " << j << ": "
                                         << sel.indices[j - 1] << ", " << i;
    }
    if (float_bits(sel.values[j]) != float_bits(v[i])) {
      return testing::AssertionFailure()
             << "value " << sel.values[j] << " at index " << i << " but e there is " << v[i];
    }
    taken[i] = true;
    min_taken = std::min(min_taken, std::fabs(v[i]));
  }
  for (size_t i = 0; i < v.size(); ++i) {
    if (!taken[i] && std::fabs(v[i]) > min_taken) {
      return testing::AssertionFailure() << "unselected |e[" << i << "]| = " << std::fabs(v[i])
                                         << " exceeds the smallest selected " << min_taken;
    }
  }
  return testing::AssertionSuccess();
}

// The count rule: all non-zeros when there are fewer than k of them, else exactly k (exact) or
// [k, floor(1.1 k)] (threshold).
inline testing::AssertionResult count_in_bounds(size_t count, size_t k, size_t nonzero,
                                                TopkSelect mode) {
  size_t lo = k, hi = mode == TopkSelect::kExact ? k : topk_max_count(k);
  if (nonzero < k) lo = hi = nonzero;
  if (count >= lo && count <= hi) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "count " << count << " outside [" << lo << ", " << hi
                                     << "] (k " << k << ", non-zeros " << nonzero << ")";
}

struct StepRecord {
  bool ok = false;
  size_t count = 0;
  int passes = 0;
  float threshold = 0.0f;
  std::vector<uint32_t> indices;
  std::vector<float> values;
};

inline StepRecord record_of(const Selection& sel) {
  StepRecord rec;
  rec.ok = true;
  rec.count = sel.indices.size();
  rec.passes = sel.passes;
  rec.threshold = sel.threshold;
  rec.indices.assign(sel.indices.begin(), sel.indices.end());
  rec.values.assign(sel.values.begin(), sel.values.end());
  return rec;
}

// e + g where the sum is finite (else e): what the residual holds before the selection.
inline std::vector<float> accumulated(std::span<const float> g, std::span<const float> e) {
  std::vector<float> v(e.begin(), e.end());
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isfinite(e[i] + g[i])) v[i] = e[i] + g[i];
  }
  return v;
}

// After a selection with error feedback, e must be the accumulated residual with exactly the
// selected entries cleared.
inline testing::AssertionResult cleared_at_selection(const Selection& sel, std::span<const float> e,
                                                     std::span<const float> accumulated_e) {
  std::vector<float> expected(accumulated_e.begin(), accumulated_e.end());
  for (uint32_t i : sel.indices) expected[i] = 0.0f;
  for (size_t i = 0; i < e.size(); ++i) {
    if (float_bits(e[i]) != float_bits(expected[i])) {
      return testing::AssertionFailure()
             << "e[" << i << "] = " << e[i] << ", expected " << expected[i];
    }
  }
  return testing::AssertionSuccess();
}

// e with the state's pending fixes applied, leaving both as they are (the next step applies the
// fixes itself, and that path is under test too).
inline std::vector<float> exact_residual(const std::vector<float>& e,
                                         const TopkSelectorState& state) {
  std::vector<float> exact = e;
  TopkSelectorState copy = state;
  apply_pending(copy, exact);
  return exact;
}

// One step as the codec does it: e += g and select; the selection must be a top set of the
// accumulated residual, which select_topk leaves cleared at the selected indices.
inline StepRecord select_and_clear(std::span<const float> g, std::vector<float>& e, size_t k,
                                   TopkSelect mode, TopkSelectorState& state) {
  const std::vector<float> before = accumulated(g, exact_residual(e, state));
  auto sel = select_topk(g, e, k, mode, state);
  EXPECT_TRUE(sel.ok()) << sel.status().to_string();
  if (!sel.ok()) return {};
  EXPECT_TRUE(is_top_selection(*sel, before));
  EXPECT_TRUE(count_in_bounds(sel->indices.size(), k, count_nonzero(before), mode));
  EXPECT_TRUE(cleared_at_selection(*sel, exact_residual(e, state), before));
  return record_of(*sel);
}

// One step without error feedback (the codec with ef=0): selects from g itself.
inline StepRecord select_no_feedback(std::span<const float> g, size_t k, TopkSelect mode,
                                     TopkSelectorState& state) {
  auto sel = select_topk(g, {}, k, mode, state);
  EXPECT_TRUE(sel.ok()) << sel.status().to_string();
  if (!sel.ok()) return {};
  EXPECT_TRUE(is_top_selection(*sel, g));
  EXPECT_TRUE(count_in_bounds(sel->indices.size(), k, count_nonzero(g), mode));
  return record_of(*sel);
}

inline std::string describe(const std::vector<StepRecord>& steps) {
  std::ostringstream out;
  out << "per step (count/passes):";
  for (const auto& s : steps) out << ' ' << s.count << '/' << s.passes;
  return out.str();
}

}  // namespace gradgate::kernels::cpu::topk_test
