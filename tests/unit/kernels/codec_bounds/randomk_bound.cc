#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "codec_bound.h"

namespace gradgate::kernels::contract {
namespace {

// randomk, a stratified selection: k strata [floor(j n / k), floor((j + 1) n / k)), one element
// each, sent exactly (an input of 0 decodes to 0, so zeros in g hide their selection).
void randomk_single_step(const CodecParams& params, const std::vector<float>& g,
                         const std::vector<float>& d, const CountBad& count_bad) {
  const size_t n = g.size();
  const size_t k = expected_k(params.density, n);
  std::vector<int> per_stratum(k, 0);
  size_t kept = 0, zeros = 0;
  for (size_t i = 0; i < n; ++i) {
    zeros += g[i] == 0.0f;
    if (d[i] == 0.0f) continue;
    ++kept;
    const size_t stratum = ((i + 1) * k + n - 1) / n - 1;
    count_bad(d[i] == g[i] && ++per_stratum[stratum] == 1, i);
  }
  if (zeros == 0) {
    EXPECT_EQ(kept, k);
  } else {
    EXPECT_LE(kept, k);
  }
}

[[maybe_unused]] const bool kRegistered =
    register_codec_bound(CodecId::kRandomk, {randomk_single_step});

}  // namespace
}  // namespace gradgate::kernels::contract
