// fp16 and bf16: each element within half an ulp of its input; three add_frames round a sum
// three times.
#include <cmath>

#include "codec_bound.h"

namespace gradgate::kernels::contract {
namespace {

void fp16_single_step(const CodecParams&, const std::vector<float>& g, const std::vector<float>& d,
                      const CountBad& count_bad) {
  for (size_t i = 0; i < g.size(); ++i) count_bad(within_fp16_rounding(g[i], d[i]), i);
}

void bf16_single_step(const CodecParams&, const std::vector<float>& g, const std::vector<float>& d,
                      const CountBad& count_bad) {
  for (size_t i = 0; i < g.size(); ++i) {
    count_bad(std::fabs(static_cast<double>(d[i]) - g[i]) <= kBf16Unit * std::fabs(g[i]), i);
  }
}

[[maybe_unused]] const bool kFp16Registered =
    register_codec_bound(CodecId::kFp16, {fp16_single_step, 3 * kFp16Unit, 3 * kFp16HalfSubnormal});
[[maybe_unused]] const bool kBf16Registered =
    register_codec_bound(CodecId::kBf16, {bf16_single_step, 3 * kBf16Unit, 1e-30});

}  // namespace
}  // namespace gradgate::kernels::contract
