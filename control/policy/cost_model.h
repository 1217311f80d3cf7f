// The cost model the policies compare codecs with: for one tensor under one codec in a job of P
// gateways, the bytes a gateway sends per step, the seconds they take on the bottleneck link, and
// the seconds of encode + decode. Frame sizes come from the codecs themselves
// (Codec::max_frame_bytes, an upper bound for topk), the collective from Codec::summable() and
// Codec::max_summands():
//   ring (a sum of P frames, one round): a gateway sends 2(P-1)/P of one frame, decodes one tensor;
//   all-gather (the others):     a gateway sends its frame of each round to P-1 peers and decodes
//                                P frames (codecs that sum P frames, multi-round: one).
// A job of one gateway sends nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "control/policy/policy.h"
#include "gradgate/kernels/codec_spec.h"

namespace gradgate::control {

struct CodecCost {
  double wire_bytes = 0.0;     // sent by one gateway per step
  double wire_seconds = 0.0;   // wire_bytes at the bottleneck goodput
  double codec_seconds = 0.0;  // encode + decode on one gateway
};

class CostModel {
 public:
  /// `bottleneck_goodput`: the lowest measured goodput of the job's links (bytes/s, > 0).
  /// Codecs without a speed in `speeds` run at `default_bytes_per_second`.
  CostModel(uint32_t nodes, double bottleneck_goodput, std::vector<CodecSpeed> speeds,
            double default_bytes_per_second);

  /// The model of a job: its bottleneck is the lowest goodput of `measurements.links`; nothing
  /// before the first link sample.
  static std::optional<CostModel> for_job(const Measurements& measurements,
                                          double default_bytes_per_second);

  /// The cost of sending `tensor` with `codec`; an error when the codec cannot take the tensor.
  Result<CodecCost> cost(const kernels::CodecParams& codec, const TensorSample& tensor) const;

  double bottleneck_goodput() const { return bottleneck_goodput_; }

 private:
  const CodecSpeed* speed_of(CodecId codec) const;

  uint32_t nodes_;
  double bottleneck_goodput_;
  std::vector<CodecSpeed> speeds_;
  double default_bytes_per_second_;
};

}  // namespace gradgate::control
