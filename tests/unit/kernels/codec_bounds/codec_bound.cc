#include "codec_bound.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

namespace gradgate::kernels::contract {
namespace {

std::array<std::optional<CodecBound>, kCodecCount>& filed_bounds() {
  static std::array<std::optional<CodecBound>, kCodecCount> bounds;
  return bounds;
}

}  // namespace

bool register_codec_bound(CodecId id, CodecBound bound) {
  filed_bounds()[static_cast<size_t>(id)] = bound;
  return true;
}

const CodecBound* codec_bound(CodecId id) {
  if (!is_codec_id(static_cast<unsigned>(id))) return nullptr;
  const auto& bound = filed_bounds()[static_cast<size_t>(id)];
  return bound ? &*bound : nullptr;
}

size_t expected_k(double density, size_t n) {
  const auto k = static_cast<size_t>(std::llround(density * static_cast<double>(n)));
  return std::clamp<size_t>(k, 1, n);
}

bool within_fp16_rounding(float input, float decoded) {
  const double err = std::fabs(static_cast<double>(decoded) - input);
  const double a = std::fabs(static_cast<double>(input));
  return a >= kFp16MinNormal ? err <= kFp16Unit * a : err <= kFp16HalfSubnormal;
}

}  // namespace gradgate::kernels::contract
