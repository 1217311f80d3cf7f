// sign: every element decodes to the mean magnitude of the input, with the input's sign.
#include <gtest/gtest.h>

#include <cmath>

#include "codec_bound.h"

namespace gradgate::kernels::contract {
namespace {

void sign_single_step(const CodecParams&, const std::vector<float>& g, const std::vector<float>& d,
                      const CountBad& count_bad) {
  double mean_abs = 0.0;
  for (float v : g) mean_abs += std::fabs(v);
  mean_abs /= static_cast<double>(g.size());
  EXPECT_NEAR(std::fabs(d[0]), mean_abs, 1e-5 * mean_abs);
  for (size_t i = 0; i < g.size(); ++i) {
    count_bad(std::fabs(d[i]) == std::fabs(d[0]) && (d[i] > 0) == (g[i] >= 0.0f), i);
  }
}

[[maybe_unused]] const bool kRegistered = register_codec_bound(CodecId::kSign, {sign_single_step});

}  // namespace
}  // namespace gradgate::kernels::contract
