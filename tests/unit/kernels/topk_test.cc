// Tests of top-k selection (kernels/cpu/topk_select.h) and of the topk codec's index encoding.
//
// Gradients come from bench/gradient_data.h (Gaussian, Laplace, Student-t(3)) and from the real
// Fashion-MNIST gradients in bench/data (about 40% of them exactly zero). Multi-step runs take
// step s's gradient as the window [s * kStride, s * kStride + n) of one long draw, so every
// element sees a new independent value each step, as with fresh gradients.
#include "topk_select.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <ostream>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/frame.h"
#include "gradgate/kernels/half.h"
#include "gradient_data.h"
#include "loops.h"

namespace gradgate::kernels::cpu {
namespace {

using bench::Dist;

constexpr int kWarmSteps = 20;
constexpr size_t kStride = 4099;  // window shift between steps (odd: no alignment with the data)
constexpr size_t kRealGradientCount = 79744;
constexpr double kDensities[] = {0.1, 0.01, 0.001};

enum class DataKind { kGaussian, kLaplace, kStudentT3, kReal };
constexpr DataKind kAllKinds[] = {DataKind::kGaussian, DataKind::kLaplace, DataKind::kStudentT3,
                                  DataKind::kReal};

std::string kind_name(DataKind kind) {
  switch (kind) {
    case DataKind::kGaussian:
      return "gaussian";
    case DataKind::kLaplace:
      return "laplace";
    case DataKind::kStudentT3:
      return "student_t3";
    case DataKind::kReal:
      return "real";
  }
  return "unknown";
}

void PrintTo(DataKind kind, std::ostream* os) { *os << kind_name(kind); }

std::string isa_name(Isa isa) { return isa == Isa::kAvx2 ? "avx2" : "baseline"; }

// Forces an instruction set for the scope; restores the best one afterwards.
class ScopedIsa {
 public:
  explicit ScopedIsa(Isa isa) { force_isa(isa); }
  ~ScopedIsa() { force_isa(best_isa()); }
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;
};

bool isa_available(Isa isa) { return isa == Isa::kBaseline || best_isa() == Isa::kAvx2; }

// The real gradients, or an empty vector when the file cannot be read.
const std::vector<float>& real_gradients() {
  static const std::vector<float> data = [] {
    std::vector<float> out(kRealGradientCount);
    std::ifstream in(std::string(GRADGATE_SOURCE_DIR) + "/bench/data/fashion_mnist_gradients.f32",
                     std::ios::binary);
    in.read(reinterpret_cast<char*>(out.data()),
            static_cast<std::streamsize>(out.size() * sizeof(float)));
    if (!in || in.peek() != std::char_traits<char>::eof()) out.clear();
    return out;
  }();
  return data;
}

// Values for kWarmSteps + 1 windows of n elements (cached: several tests share them).
const std::vector<float>& gradient_source(DataKind kind, size_t n) {
  static std::map<std::pair<DataKind, size_t>, std::vector<float>> cache;
  auto& source = cache[{kind, n}];
  if (!source.empty()) return source;
  const size_t length = n + kWarmSteps * kStride;
  if (kind == DataKind::kReal) {
    const auto& real = real_gradients();
    if (real.empty()) return source;
    source.resize(length);
    for (size_t i = 0; i < length; ++i) source[i] = real[i % real.size()];
  } else {
    const Dist dist = kind == DataKind::kGaussian  ? Dist::kGaussian
                      : kind == DataKind::kLaplace ? Dist::kLaplace
                                                   : Dist::kStudentT3;
    source = bench::make_gradient(dist, length, 1000 + static_cast<uint64_t>(kind) * 17 + n);
  }
  return source;
}

std::span<const float> window(const std::vector<float>& source, size_t n, int step) {
  return {source.data() + static_cast<size_t>(step) * kStride, n};
}

size_t count_nonzero(std::span<const float> v) {
  return static_cast<size_t>(std::count_if(v.begin(), v.end(), [](float x) { return x != 0.0f; }));
}

// Indices strictly ascending and in range, values equal to v there, and every selected |v| at
// least every unselected |v| (a top set: nothing left out is larger than something taken).
testing::AssertionResult is_top_selection(const Selection& sel, std::span<const float> v) {
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
testing::AssertionResult count_in_bounds(size_t count, size_t k, size_t nonzero, TopkSelect mode) {
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

StepRecord record_of(const Selection& sel) {
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
std::vector<float> accumulated(std::span<const float> g, std::span<const float> e) {
  std::vector<float> v(e.begin(), e.end());
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isfinite(e[i] + g[i])) v[i] = e[i] + g[i];
  }
  return v;
}

// After a selection with error feedback, e must be the accumulated residual with exactly the
// selected entries cleared.
testing::AssertionResult cleared_at_selection(const Selection& sel, std::span<const float> e,
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
std::vector<float> exact_residual(const std::vector<float>& e, const TopkSelectorState& state) {
  std::vector<float> exact = e;
  TopkSelectorState copy = state;
  apply_pending(copy, exact);
  return exact;
}

// One step as the codec does it: e += g and select; the selection must be a top set of the
// accumulated residual, which select_topk leaves cleared at the selected indices.
StepRecord select_and_clear(std::span<const float> g, std::vector<float>& e, size_t k,
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
StepRecord select_no_feedback(std::span<const float> g, size_t k, TopkSelect mode,
                              TopkSelectorState& state) {
  auto sel = select_topk(g, {}, k, mode, state);
  EXPECT_TRUE(sel.ok()) << sel.status().to_string();
  if (!sel.ok()) return {};
  EXPECT_TRUE(is_top_selection(*sel, g));
  EXPECT_TRUE(count_in_bounds(sel->indices.size(), k, count_nonzero(g), mode));
  return record_of(*sel);
}

std::string describe(const std::vector<StepRecord>& steps) {
  std::ostringstream out;
  out << "per step (count/passes):";
  for (const auto& s : steps) out << ' ' << s.count << '/' << s.passes;
  return out.str();
}

int median_passes(const std::vector<StepRecord>& steps) {
  std::vector<int> passes;
  for (const auto& s : steps) passes.push_back(s.passes);
  std::nth_element(passes.begin(), passes.begin() + static_cast<ptrdiff_t>(passes.size() / 2),
                   passes.end());
  return passes[passes.size() / 2];
}

// ---- topk_count and topk_max_count ---------------------------------------------------------

TEST(TopkCountTest, RoundsDensityTimesNAndClamps) {
  EXPECT_EQ(topk_count(0.01, 65536), 655u);  // 655.36
  EXPECT_EQ(topk_count(0.001, 262144), 262u);
  EXPECT_EQ(topk_count(0.1, 1000), 100u);
  EXPECT_EQ(topk_count(0.0105, 200), 2u);  // 2.1
  EXPECT_EQ(topk_count(1e-9, 100), 1u);    // at least one
  EXPECT_EQ(topk_count(1.0, 7), 7u);
  EXPECT_EQ(topk_count(1.0, 1), 1u);
}

TEST(TopkCountTest, MaxCountIsFloorOfElevenTenths) {
  for (size_t k : {1, 9, 10, 19, 100, 262, 655, 6554, 26214}) {
    EXPECT_EQ(topk_max_count(k),
              static_cast<size_t>(std::floor(1.1 * static_cast<double>(k) + 1e-9)))
        << "k " << k;
  }
}

TEST(TopkDataTest, RealGradientsLoadWithTheirZeros) {
  const auto& real = real_gradients();
  ASSERT_EQ(real.size(), kRealGradientCount)
      << "cannot read bench/data/fashion_mnist_gradients.f32";
  const double zero_fraction =
      1.0 - static_cast<double>(count_nonzero(real)) / static_cast<double>(real.size());
  EXPECT_GT(zero_fraction, 0.3);
  EXPECT_LT(zero_fraction, 0.5);
  EXPECT_TRUE(std::all_of(real.begin(), real.end(), [](float v) { return std::isfinite(v); }));
}

// ---- threshold mode on all data kinds -------------------------------------------------------

// Runs on the best instruction set; TopkIsaTest runs the same checks on both and compares them.
using SweepParam = std::tuple<DataKind, int /*log2 n*/, double /*density*/>;

class TopkThresholdSweep : public testing::TestWithParam<SweepParam> {};

TEST_P(TopkThresholdSweep, CountLandsInKTo1Point1KColdAndWarm) {
  const auto [kind, log2n, density] = GetParam();
  const size_t n = size_t{1} << log2n;
  const auto& source = gradient_source(kind, n);
  ASSERT_FALSE(source.empty()) << "no data for " << kind_name(kind);
  const size_t k = topk_count(density, n);

  // Cold, then warm, without error feedback.
  {
    SCOPED_TRACE("no error feedback");
    TopkSelectorState state;
    std::vector<StepRecord> steps;
    for (int step = 0; step < 4; ++step) {
      steps.push_back(
          select_no_feedback(window(source, n, step), k, TopkSelect::kThreshold, state));
    }
    EXPECT_FALSE(HasFailure()) << describe(steps);
  }
  // Cold (fresh state, zero residual), then kWarmSteps warm-started steps with error feedback.
  SCOPED_TRACE("error feedback");
  TopkSelectorState state;
  std::vector<float> e(n, 0.0f);
  std::vector<StepRecord> steps;
  for (int step = 0; step <= kWarmSteps; ++step) {
    steps.push_back(select_and_clear(window(source, n, step), e, k, TopkSelect::kThreshold, state));
  }
  EXPECT_FALSE(HasFailure()) << describe(steps);
}

std::string sweep_name(const testing::TestParamInfo<SweepParam>& info) {
  const auto [kind, log2n, density] = info.param;
  return kind_name(kind) + "_n2p" + std::to_string(log2n) + "_d" +
         std::to_string(static_cast<int>(std::lround(density * 1000))) + "permille";
}

INSTANTIATE_TEST_SUITE_P(AllKinds, TopkThresholdSweep,
                         testing::Combine(testing::ValuesIn(kAllKinds), testing::Values(16, 18),
                                          testing::ValuesIn(kDensities)),
                         sweep_name);

// ---- exact mode -----------------------------------------------------------------------------

// The multiset of the k largest |v|, by std::nth_element on a copy.
std::vector<float> largest_magnitudes(std::span<const float> v, size_t k) {
  std::vector<float> mags(v.size());
  std::transform(v.begin(), v.end(), mags.begin(), [](float x) { return std::fabs(x); });
  std::nth_element(mags.begin(), mags.begin() + static_cast<ptrdiff_t>(k - 1), mags.end(),
                   std::greater<>());
  mags.resize(k);
  std::sort(mags.begin(), mags.end());
  return mags;
}

TEST(TopkExactTest, SelectsExactlyTheKLargestMagnitudes) {
  constexpr size_t n = size_t{1} << 16;
  for (DataKind kind : kAllKinds) {
    const auto& source = gradient_source(kind, n);
    ASSERT_FALSE(source.empty());
    for (double density : kDensities) {
      SCOPED_TRACE(kind_name(kind) + " density " + std::to_string(density));
      const size_t k = topk_count(density, n);
      TopkSelectorState state;
      std::vector<float> e(n, 0.0f);
      for (int step = 0; step <= kWarmSteps; ++step) {
        const std::vector<float> before =
            accumulated(window(source, n, step), exact_residual(e, state));
        auto sel = select_topk(window(source, n, step), e, k, TopkSelect::kExact, state);
        ASSERT_TRUE(sel.ok()) << sel.status().to_string();
        ASSERT_EQ(sel->indices.size(), k) << "step " << step;
        ASSERT_TRUE(is_top_selection(*sel, before)) << "step " << step;
        ASSERT_TRUE(cleared_at_selection(*sel, exact_residual(e, state), before))
            << "step " << step;
        std::vector<float> taken(sel->values.size());
        std::transform(sel->values.begin(), sel->values.end(), taken.begin(),
                       [](float x) { return std::fabs(x); });
        std::sort(taken.begin(), taken.end());
        ASSERT_EQ(taken, largest_magnitudes(before, k)) << "step " << step;
      }
    }
  }
}

// ---- warm start -----------------------------------------------------------------------------

TEST(TopkWarmStartTest, SteadyStateTakesOnePassPerStep) {
  constexpr size_t n = size_t{1} << 16;
  for (DataKind kind : kAllKinds) {
    const auto& source = gradient_source(kind, n);
    ASSERT_FALSE(source.empty());
    for (double density : kDensities) {
      for (TopkSelect mode : {TopkSelect::kThreshold, TopkSelect::kExact}) {
        SCOPED_TRACE(kind_name(kind) + " density " + std::to_string(density) +
                     (mode == TopkSelect::kExact ? " exact" : " threshold"));
        const size_t k = topk_count(density, n);
        TopkSelectorState state;
        std::vector<float> e(n, 0.0f);
        std::vector<StepRecord> warm;
        const StepRecord cold = select_and_clear(window(source, n, 0), e, k, mode, state);
        EXPECT_GE(cold.passes, 2) << "a cold step cannot select in the accumulating pass";
        for (int step = 1; step <= kWarmSteps; ++step) {
          warm.push_back(select_and_clear(window(source, n, step), e, k, mode, state));
        }
        EXPECT_EQ(median_passes(warm), 1) << describe(warm);
      }
    }
  }
}

// Without feedback there is no residual pass to fuse with: a warm step reads g once for its
// statistics and finiteness, and once more for the candidates.
TEST(TopkWarmStartTest, SteadyStateWithoutFeedbackReadsTwice) {
  constexpr size_t n = size_t{1} << 16;
  for (DataKind kind : kAllKinds) {
    const auto& source = gradient_source(kind, n);
    ASSERT_FALSE(source.empty());
    SCOPED_TRACE(kind_name(kind));
    const size_t k = topk_count(0.01, n);
    TopkSelectorState state;
    select_no_feedback(window(source, n, 0), k, TopkSelect::kThreshold, state);
    std::vector<StepRecord> warm;
    for (int step = 1; step <= kWarmSteps; ++step) {
      warm.push_back(select_no_feedback(window(source, n, step), k, TopkSelect::kThreshold, state));
    }
    EXPECT_EQ(median_passes(warm), 2) << describe(warm);
  }
}

TEST(TopkWarmStartTest, RecoversFromADistributionShift) {
  constexpr size_t n = size_t{1} << 16;
  const auto& source = gradient_source(DataKind::kLaplace, n);
  const size_t k = topk_count(0.01, n);
  TopkSelectorState state;
  std::vector<StepRecord> steps;
  for (int step = 0; step <= 8; ++step) {
    // Scale jumps by 1000x up at step 3 and down by 10^6 at step 6 (no feedback: pure shifts).
    const float scale = step < 3 ? 1.0f : step < 6 ? 1000.0f : 1e-3f;
    std::vector<float> g(window(source, n, step).begin(), window(source, n, step).end());
    for (float& x : g) x *= scale;
    steps.push_back(select_no_feedback(g, k, TopkSelect::kThreshold, state));
  }
  EXPECT_FALSE(HasFailure()) << describe(steps);
  EXPECT_EQ(steps.back().passes, 2) << describe(steps);
}

// ---- the same selection under both instruction sets ------------------------------------------

TEST(TopkIsaTest, BaselineAndAvx2SelectTheSame) {
  if (!isa_available(Isa::kAvx2)) GTEST_SKIP() << "CPU lacks AVX2/FMA/F16C";
  constexpr size_t n = (size_t{1} << 16) + 5;  // a tail after the last 8-lane block
  for (DataKind kind : kAllKinds) {
    const auto& source = gradient_source(kind, n);
    ASSERT_FALSE(source.empty());
    for (double density : kDensities) {
      for (TopkSelect mode : {TopkSelect::kThreshold, TopkSelect::kExact}) {
        SCOPED_TRACE(kind_name(kind) + " density " + std::to_string(density) +
                     (mode == TopkSelect::kExact ? " exact" : " threshold"));
        const size_t k = topk_count(density, n);
        TopkSelectorState base_state, avx_state;
        std::vector<float> base_e(n, 0.0f), avx_e(n, 0.0f);
        for (int step = 0; step <= kWarmSteps; ++step) {
          const auto g = window(source, n, step);
          force_isa(Isa::kBaseline);
          const StepRecord base = select_and_clear(g, base_e, k, mode, base_state);
          force_isa(Isa::kAvx2);
          const StepRecord avx = select_and_clear(g, avx_e, k, mode, avx_state);
          force_isa(best_isa());
          ASSERT_EQ(base.indices, avx.indices) << "step " << step;
          ASSERT_EQ(base.values, avx.values) << "step " << step;
          ASSERT_EQ(base_e, avx_e) << "step " << step;
        }
        // The no-feedback path too.
        TopkSelectorState base_nf, avx_nf;
        for (int step = 0; step < 3; ++step) {
          const auto g = window(source, n, step);
          force_isa(Isa::kBaseline);
          const StepRecord base = select_no_feedback(g, k, mode, base_nf);
          force_isa(Isa::kAvx2);
          const StepRecord avx = select_no_feedback(g, k, mode, avx_nf);
          force_isa(best_isa());
          ASSERT_EQ(base.indices, avx.indices) << "no feedback, step " << step;
        }
      }
    }
  }
}

// The passes behind every step: their statistics feed the Laplace fit and the warm start, so any
// difference between the ISAs, even in the last bit of abs_sum, can change later selections.
TEST(TopkIsaTest, StatisticsAndSelectionLoopsAgreeBitForBit) {
  if (!isa_available(Isa::kAvx2)) GTEST_SKIP() << "CPU lacks AVX2/FMA/F16C";
  force_isa(Isa::kBaseline);
  const LoopTable& base = loops();
  force_isa(Isa::kAvx2);
  const LoopTable& avx = loops();
  force_isa(best_isa());
  for (size_t n : {size_t{5}, size_t{4096 + 3}, (size_t{1} << 16) + 5}) {
    const auto g = bench::make_gradient(Dist::kStudentT3, n, 61);
    const auto e0 = bench::make_gradient(Dist::kLaplace, n, 62);
    for (size_t cap : {n, n / 50}) {
      SCOPED_TRACE("n " + std::to_string(n) + " cap " + std::to_string(cap));
      const float t = 2e-3f;
      std::vector<float> base_e = e0, avx_e = e0;
      std::vector<uint32_t> base_idx(cap + 8), avx_idx(cap + 8);
      std::vector<float> base_val(cap + 8), avx_val(cap + 8);
      // Pending fixes at every 7th element and the last (the tail), as a previous step leaves.
      std::vector<uint32_t> fix_idx;
      std::vector<float> fix_val;
      for (size_t i = 0; i < n; i += (i + 7 < n || i == n - 1) ? 7 : n - 1 - i) {
        fix_idx.push_back(static_cast<uint32_t>(i));
        fix_val.push_back(g[n - 1 - i]);
      }
      const PendingFixes fix{fix_idx.data(), fix_val.data(), fix_idx.size()};
      const SelectResult b = base.accumulate_select(g.data(), base_e.data(), n, t, base_idx.data(),
                                                    base_val.data(), cap, fix);
      const SelectResult a = avx.accumulate_select(g.data(), avx_e.data(), n, t, avx_idx.data(),
                                                   avx_val.data(), cap, fix);
      EXPECT_EQ(a.count, b.count);
      EXPECT_EQ(a.stats.nonfinite, b.stats.nonfinite);
      EXPECT_EQ(a.stats.abs_max, b.stats.abs_max);
      EXPECT_EQ(a.stats.abs_sum, b.stats.abs_sum)
          << "difference " << a.stats.abs_sum - b.stats.abs_sum;
      EXPECT_EQ(avx_e, base_e);
      const size_t stored = std::min(b.count, cap);
      base_idx.resize(stored);
      avx_idx.resize(stored);
      base_val.resize(stored);
      avx_val.resize(stored);
      EXPECT_EQ(avx_idx, base_idx);
      EXPECT_EQ(avx_val, base_val);
      std::vector<uint32_t> scratch_idx(8);  // room for cap (0) + 8 entries
      std::vector<float> scratch_val(8);
      EXPECT_EQ(avx.scan_select(base_e.data(), n, t, scratch_idx.data(), scratch_val.data(), 0),
                base.scan_select(base_e.data(), n, t, scratch_idx.data(), scratch_val.data(), 0));
      for (const float* residual : {e0.data(), static_cast<const float*>(nullptr)}) {
        const AbsStats bs = base.abs_stats(g.data(), residual, n);
        const AbsStats as = avx.abs_stats(g.data(), residual, n);
        EXPECT_EQ(as.abs_sum, bs.abs_sum) << "abs_stats, difference " << as.abs_sum - bs.abs_sum;
        EXPECT_EQ(as.abs_max, bs.abs_max);
      }
    }
  }
}

// ---- degenerate inputs ----------------------------------------------------------------------

// Runs `steps` steps of g (the same each step, with error feedback) and two steps without
// feedback, in both modes and on both ISAs, from fresh states; checks every selection.
void check_degenerate(const std::vector<float>& g, size_t k, int steps) {
  for (Isa isa : {Isa::kBaseline, Isa::kAvx2}) {
    if (!isa_available(isa)) continue;
    const ScopedIsa scoped(isa);
    for (TopkSelect mode : {TopkSelect::kThreshold, TopkSelect::kExact}) {
      SCOPED_TRACE(isa_name(isa) + (mode == TopkSelect::kExact ? " exact" : " threshold"));
      TopkSelectorState state;
      std::vector<float> e(g.size(), 0.0f);
      std::vector<StepRecord> records;
      for (int step = 0; step < steps; ++step) {
        records.push_back(select_and_clear(g, e, k, mode, state));
      }
      TopkSelectorState nf_state;
      records.push_back(select_no_feedback(g, k, mode, nf_state));
      records.push_back(select_no_feedback(g, k, mode, nf_state));
      EXPECT_FALSE(testing::Test::HasFailure()) << describe(records);
    }
  }
}

TEST(TopkDegenerateTest, AllZeroGradientSelectsNothing) {
  for (size_t n : {size_t{1}, size_t{8}, size_t{1000}, size_t{1} << 16}) {
    SCOPED_TRACE("n " + std::to_string(n));
    check_degenerate(std::vector<float>(n, 0.0f), topk_count(0.01, n), 3);
  }
}

TEST(TopkDegenerateTest, AllZeroAfterWarmStepsSelectsNothing) {
  constexpr size_t n = 4096;
  const size_t k = topk_count(0.01, n);
  const auto g = bench::make_gradient(Dist::kLaplace, n, 5);
  for (TopkSelect mode : {TopkSelect::kThreshold, TopkSelect::kExact}) {
    TopkSelectorState state;
    std::vector<float> e(n, 0.0f);
    for (int step = 0; step < 3; ++step) select_and_clear(g, e, k, mode, state);
    ASSERT_GT(state.threshold, 0.0f);
    apply_pending(state, e);  // as Stream::residual() does before anyone writes the residual
    std::fill(e.begin(), e.end(), 0.0f);
    const std::vector<float> zeros(n, 0.0f);
    const StepRecord rec = select_and_clear(zeros, e, k, mode, state);
    EXPECT_EQ(rec.count, 0u);
  }
}

TEST(TopkDegenerateTest, FewerNonZerosThanKSelectsAllOfThem) {
  constexpr size_t n = 1 << 14;
  std::vector<float> g(n, 0.0f);
  for (size_t j = 0; j < 10; ++j) {
    g[j * 1531 + 7] = (j % 2 ? -1.0f : 1.0f) * static_cast<float>(j + 1);
  }
  check_degenerate(g, 100, 3);
}

TEST(TopkDegenerateTest, AllEqualValuesStayWithinBoundsOrExactlyK) {
  constexpr size_t n = 1 << 14;
  for (double density : kDensities) {
    SCOPED_TRACE("density " + std::to_string(density));
    check_degenerate(std::vector<float>(n, 0.25f), topk_count(density, n), 3);
    std::vector<float> signs(n, 0.25f);
    for (size_t i = 0; i < n; i += 3) signs[i] = -0.25f;
    check_degenerate(signs, topk_count(density, n), 3);
  }
}

TEST(TopkDegenerateTest, FewDistinctValuesStayWithinBoundsOrExactlyK) {
  constexpr size_t n = 1 << 14;
  std::mt19937 rng(11);
  std::vector<float> g(n);
  for (float& x : g) x = static_cast<float>(static_cast<int>(rng() % 9) - 4);  // -4..4: many ties
  for (double density : kDensities) {
    SCOPED_TRACE("density " + std::to_string(density));
    check_degenerate(g, topk_count(density, n), 3);
  }
}

TEST(TopkDegenerateTest, SingleElement) {
  check_degenerate({3.5f}, 1, 3);
  check_degenerate({-1e-20f}, 1, 3);
  check_degenerate({0.0f}, 1, 3);
}

TEST(TopkDegenerateTest, KEqualsNSelectsEveryNonZero) {
  for (size_t n : {size_t{1}, size_t{7}, size_t{1000}}) {
    SCOPED_TRACE("n " + std::to_string(n));
    auto g = bench::make_gradient(Dist::kGaussian, n, 3);
    ASSERT_EQ(topk_count(1.0, n), n);
    check_degenerate(g, n, 3);
    for (size_t i = 0; i < n; i += 2) g[i] = 0.0f;  // half zeros: fewer non-zeros than k
    check_degenerate(g, n, 3);
  }
}

TEST(TopkDegenerateTest, HugeDynamicRange) {
  constexpr size_t n = 1 << 14;
  std::mt19937 rng(17);
  std::uniform_real_distribution<double> decade(-30.0, 30.0);
  std::vector<float> g(n);
  for (float& x : g) x = static_cast<float>((rng() & 1 ? 1.0 : -1.0) * std::pow(10.0, decade(rng)));
  for (double density : kDensities) {
    SCOPED_TRACE("density " + std::to_string(density));
    check_degenerate(g, topk_count(density, n), 4);
  }
}

// ---- non-finite gradients --------------------------------------------------------------------

TEST(TopkNonFiniteTest, NanOrInfReturnsErrorAndRestoresResidual) {
  constexpr size_t n = 1000;
  constexpr size_t k = 10;
  const auto good = bench::make_gradient(Dist::kGaussian, n, 21);
  const auto initial_residual = bench::make_gradient(Dist::kLaplace, n, 22);
  for (Isa isa : {Isa::kBaseline, Isa::kAvx2}) {
    if (!isa_available(isa)) continue;
    const ScopedIsa scoped(isa);
    for (float bad :
         {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
          -std::numeric_limits<float>::infinity()}) {
      for (bool warm : {false, true}) {
        for (size_t where : {size_t{0}, size_t{517}, n - 1}) {  // in a block and in the tail
          SCOPED_TRACE(isa_name(isa) + " bad " + std::to_string(bad) + (warm ? " warm" : " cold") +
                       " at " + std::to_string(where));
          TopkSelectorState state;
          std::vector<float> e = initial_residual;
          if (warm) {
            for (int step = 0; step < 3; ++step) {
              select_and_clear(good, e, k, TopkSelect::kThreshold, state);
            }
          }
          const std::vector<float> e_before = exact_residual(e, state);
          const float threshold_before = state.threshold;
          std::vector<float> g = good;
          g[where] = bad;
          auto sel = select_topk(g, e, k, TopkSelect::kThreshold, state);
          ASSERT_FALSE(sel.ok());
          EXPECT_EQ(sel.status().code(), ErrorCode::kNonFiniteGradient);
          for (size_t i = 0; i < n; ++i) {
            ASSERT_NEAR(e[i], e_before[i], 1e-6f * (std::fabs(e_before[i]) + std::fabs(good[i])))
                << "residual not restored at " << i;
          }
          EXPECT_EQ(state.threshold, threshold_before);
          EXPECT_EQ(state.pending_count, 0u) << "the failed pass applied the pending fixes";
          // Without error feedback too.
          auto no_feedback = select_topk(g, {}, k, TopkSelect::kThreshold, state);
          EXPECT_FALSE(no_feedback.ok());
          // The stream is still usable.
          select_and_clear(good, e, k, TopkSelect::kThreshold, state);
        }
      }
    }
  }
}

// ---- the codec's index encoding --------------------------------------------------------------

std::vector<float> decode_dense(const Codec& codec, std::span<const std::byte> frame,
                                const Stream& stream, size_t n) {
  std::vector<float> out(n, 0.0f);
  auto view = parse_frame(frame);
  EXPECT_TRUE(view.ok()) << view.status().to_string();
  if (!view.ok()) return out;
  const Status st = codec.decode_accumulate(*view, &stream, out);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return out;
}

TEST(TopkCodecTest, BitmapAtHighDensityVarintsAtLowDensity) {
  constexpr size_t n = 20000 + 3;  // not a multiple of 8: the bitmap has a partial last byte
  for (const auto& [density, bitmap] : {std::pair{0.5, true}, std::pair{0.01, false}}) {
    for (const char* select : {"threshold", "exact"}) {
      for (const char* values : {"fp32", "fp16"}) {
        const std::string spec =
            "topk:density=" + std::to_string(density) + ",select=" + select + ",values=" + values;
        SCOPED_TRACE(spec);
        auto codec = make_cpu_codec(parse_codec_spec(spec).value());
        ASSERT_TRUE(codec.ok()) << codec.status().to_string();
        const TensorDesc desc{.job_id = 3, .tensor_id = 9, .elements = n};
        auto stream = (*codec)->make_stream(desc);
        ASSERT_TRUE(stream.ok());
        const bool fp16 = std::string(values) == "fp16";
        const TopkSelect mode =
            std::string(select) == "exact" ? TopkSelect::kExact : TopkSelect::kThreshold;
        const size_t k = topk_count(density, n);
        // A mirror of the codec's state, driven by select_topk directly.
        TopkSelectorState mirror_state;
        std::vector<float> mirror_e(n, 0.0f);
        std::vector<std::byte> buf((*codec)->max_frame_bytes(desc));
        for (int step = 0; step < 3; ++step) {
          const auto g = bench::make_gradient(Dist::kLaplace, n, 40 + static_cast<uint64_t>(step));
          StepContext ctx;
          ctx.step = static_cast<uint64_t>(step);
          auto size = (*codec)->encode(0, ctx, g, **stream, buf);
          ASSERT_TRUE(size.ok()) << size.status().to_string();
          ASSERT_LE(*size, buf.size());
          auto view = parse_frame({buf.data(), *size});
          ASSERT_TRUE(view.ok()) << view.status().to_string();
          EXPECT_EQ((view->header.flags & 1) != 0, bitmap) << "flags " << int{view->header.flags};
          EXPECT_EQ((view->header.flags & 2) != 0, fp16);

          auto sel = select_topk(g, mirror_e, k, mode, mirror_state);
          ASSERT_TRUE(sel.ok());
          apply_pending(mirror_state, mirror_e);
          std::vector<float> expected(n, 0.0f);
          for (size_t j = 0; j < sel->indices.size(); ++j) {
            const float v = sel->values[j];
            const float sent = fp16 ? fp16_to_float(float_to_fp16(v)) : v;
            expected[sel->indices[j]] = sent;
            mirror_e[sel->indices[j]] = v - sent;
          }
          const auto decoded = decode_dense(**codec, {buf.data(), *size}, **stream, n);
          ASSERT_EQ(decoded, expected) << "step " << step;
        }
        // Read only now: until then the codec's residual carried its pending fixes from step to
        // step, while the mirror applied them at once.
        const auto residual = (*stream)->residual();
        ASSERT_TRUE(std::equal(residual.begin(), residual.end(), mirror_e.begin()));
      }
    }
  }
}

}  // namespace
}  // namespace gradgate::kernels::cpu
