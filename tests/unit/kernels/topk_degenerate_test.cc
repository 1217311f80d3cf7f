// Tests of top-k selection (kernels/cpu/topk_select.h) on degenerate and non-finite gradients,
// and of the topk codec's index encoding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/frame.h"
#include "gradgate/kernels/half.h"
#include "gradient_data.h"
#include "loops.h"
#include "topk_select.h"
#include "topk_test_support.h"

namespace gradgate::kernels::cpu {
namespace {

using bench::Dist;
using topk_test::describe;
using topk_test::exact_residual;
using topk_test::isa_available;
using topk_test::isa_name;
using topk_test::kDensities;
using topk_test::ScopedIsa;
using topk_test::select_and_clear;
using topk_test::select_no_feedback;
using topk_test::StepRecord;

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
