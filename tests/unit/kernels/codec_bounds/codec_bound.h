// What each codec promises for one step of one worker's input, written in the codec's own file of
// this folder (none_bound.cc, half_bound.cc, ...): the bound the contract test
// (codec_contract_test.cc) holds every decoded element to, and how far a sum of frames may round.
// A codec of the table without one fails CodecBounds.EveryCodecOfTheTableHasOneAndIsTested.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "gradgate/base/codec_table.h"
#include "gradgate/kernels/codec_spec.h"

namespace gradgate::kernels::contract {

/// Reports element `i` as outside the bound when `ok` is false.
using CountBad = std::function<void(bool ok, size_t i)>;

struct CodecBound {
  /// Checks each element of the decoded `d` against the input `g` of one step (count_bad), and
  /// what must hold of the whole vector (gtest expectations).
  void (*single_step)(const CodecParams& params, const std::vector<float>& g,
                      const std::vector<float>& d, const CountBad& count_bad) = nullptr;
  /// The decoded sum of frames may differ from the sum of their decodings by
  /// sum_relative * sum(|decoded|) + sum_absolute per element.
  double sum_relative = 1e-6;
  double sum_absolute = 1e-30;
};

/// Files `bound` as the one of `id`. Returns true, so that a codec's file registers its bound
/// when the tests start: `[[maybe_unused]] const bool kRegistered = register_codec_bound(...)`.
bool register_codec_bound(CodecId id, CodecBound bound);
/// The bound filed for `id`, or nullptr.
const CodecBound* codec_bound(CodecId id);

inline constexpr double kFp16Unit = 1.0 / 2048.0;               // 2^-11: half an fp16 ulp, relative
inline constexpr double kBf16Unit = 1.0 / 256.0;                // 2^-8: half a bf16 ulp, relative
inline constexpr double kFp16MinNormal = 1.0 / 16384.0;         // 2^-14
inline constexpr double kFp16HalfSubnormal = 1.0 / 33554432.0;  // 2^-25: half the subnormal step

/// The k of a sparse codec of `density` on `n` elements: rounded, at least 1, at most n.
size_t expected_k(double density, size_t n);
/// |decoded - input| within half an fp16 ulp: relative for normal fp16, absolute below.
bool within_fp16_rounding(float input, float decoded);

}  // namespace gradgate::kernels::contract
