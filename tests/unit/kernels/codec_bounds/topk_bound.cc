#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "codec_bound.h"

namespace gradgate::kernels::contract {
namespace {

// topk: the kept elements are sent exactly (or rounded to fp16), k of them in exact mode and
// [k, 1.1 k] in threshold mode, and none dropped is larger than one kept.
void topk_single_step(const CodecParams& params, const std::vector<float>& g,
                      const std::vector<float>& d, const CountBad& count_bad) {
  const size_t n = g.size();
  const size_t k = expected_k(params.density, n);
  const bool fp16 = params.values == ValueType::kFp16;
  size_t kept = 0;
  double min_kept = std::numeric_limits<double>::infinity(), max_dropped = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double a = std::fabs(static_cast<double>(g[i]));
    if (d[i] == 0.0f) {
      max_dropped = std::max(max_dropped, a);
      continue;
    }
    ++kept;
    min_kept = std::min(min_kept, a);
    count_bad(fp16 ? within_fp16_rounding(g[i], d[i]) : d[i] == g[i], i);
  }
  if (params.select == TopkSelect::kExact) {
    EXPECT_EQ(kept, k);
  } else {
    EXPECT_GE(kept, k);
    EXPECT_LE(kept, k + k / 10);
  }
  EXPECT_GE(min_kept, max_dropped) << "a dropped element is larger than a kept one";
}

[[maybe_unused]] const bool kRegistered = register_codec_bound(CodecId::kTopk, {topk_single_step});

}  // namespace
}  // namespace gradgate::kernels::contract
