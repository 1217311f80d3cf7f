// Tests of top-k selection (kernels/cpu/topk_select.h) on gradient-like data: counts, exact mode,
// warm starts and both instruction sets (topk_degenerate_test.cc has the degenerate inputs).
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
#include <map>
#include <ostream>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gradient_data.h"
#include "loops.h"
#include "topk_test_support.h"

namespace gradgate::kernels::cpu {
namespace {

using bench::Dist;
using topk_test::accumulated;
using topk_test::cleared_at_selection;
using topk_test::count_nonzero;
using topk_test::describe;
using topk_test::exact_residual;
using topk_test::is_top_selection;
using topk_test::isa_available;
using topk_test::kDensities;
using topk_test::select_and_clear;
using topk_test::select_no_feedback;
using topk_test::StepRecord;

constexpr int kWarmSteps = 20;
constexpr size_t kStride = 4099;  // window shift between steps (odd: no alignment with the data)
constexpr size_t kRealGradientCount = 79744;

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

}  // namespace
}  // namespace gradgate::kernels::cpu
