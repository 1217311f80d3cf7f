// qsgd: each element within one level (the largest magnitude over 2^bits - 1) of its input.
#include <algorithm>
#include <cmath>

#include "codec_bound.h"

namespace gradgate::kernels::contract {
namespace {

void qsgd_single_step(const CodecParams& params, const std::vector<float>& g,
                      const std::vector<float>& d, const CountBad& count_bad) {
  double scale = 0.0;
  for (float v : g) scale = std::max(scale, std::fabs(static_cast<double>(v)));
  const double bound = scale / ((1 << params.bits) - 1) * (1.0 + 1e-5);
  for (size_t i = 0; i < g.size(); ++i) {
    count_bad(std::fabs(static_cast<double>(d[i]) - g[i]) <= bound, i);
  }
}

[[maybe_unused]] const bool kRegistered = register_codec_bound(CodecId::kQsgd, {qsgd_single_step});

}  // namespace
}  // namespace gradgate::kernels::contract
