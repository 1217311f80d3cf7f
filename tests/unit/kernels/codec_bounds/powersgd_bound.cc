#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "codec_bound.h"

namespace gradgate::kernels::contract {
namespace {

// powersgd: finite, and no larger than the input.
void powersgd_single_step(const CodecParams&, const std::vector<float>& g,
                          const std::vector<float>& d, const CountBad& count_bad) {
  const size_t n = g.size();
  double norm_g = 0.0, norm_d = 0.0;
  for (size_t i = 0; i < n; ++i) {
    count_bad(std::isfinite(d[i]), i);
    norm_g += static_cast<double>(g[i]) * g[i];
    norm_d += static_cast<double>(d[i]) * d[i];
  }
  EXPECT_LE(std::sqrt(norm_d), std::sqrt(norm_g) * (1.0 + 1e-4))
      << "decoding is an orthogonal projection and cannot grow the input";
  EXPECT_GT(norm_d, 0.0);
}

[[maybe_unused]] const bool kRegistered =
    register_codec_bound(CodecId::kPowersgd, {powersgd_single_step, 1e-5, 1e-30});

}  // namespace
}  // namespace gradgate::kernels::contract
