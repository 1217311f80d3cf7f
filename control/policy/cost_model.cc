#include "control/policy/cost_model.h"

#include <algorithm>

namespace gradgate::control {

CostModel::CostModel(uint32_t nodes, double bottleneck_goodput, std::vector<CodecSpeed> speeds,
                     double default_bytes_per_second)
    : nodes_(nodes),
      bottleneck_goodput_(bottleneck_goodput),
      speeds_(std::move(speeds)),
      default_bytes_per_second_(default_bytes_per_second) {}

std::optional<CostModel> CostModel::for_job(const Measurements& measurements,
                                            double default_bytes_per_second) {
  if (measurements.links.empty()) return std::nullopt;
  const auto slowest =
      std::min_element(measurements.links.begin(), measurements.links.end(),
                       [](const LinkSample& a, const LinkSample& b) {
                         return a.goodput_bytes_per_second < b.goodput_bytes_per_second;
                       });
  return CostModel(measurements.nodes, slowest->goodput_bytes_per_second, measurements.codec_speeds,
                   default_bytes_per_second);
}

Result<CodecCost> CostModel::cost(const kernels::CodecParams& codec,
                                  const TensorSample& tensor) const {
  const kernels::CodecParams sent =
      kernels::sent_in_precision(codec, tensor.dtype == Dtype::kFp16   ? CodecId::kFp16
                                        : tensor.dtype == Dtype::kBf16 ? CodecId::kBf16
                                                                       : CodecId::kNone);
  auto made = kernels::make_cpu_codec(sent);
  if (!made.ok()) return made.status();
  const kernels::Codec& c = **made;
  const kernels::TensorDesc desc{
      .elements = tensor.elements, .rows = tensor.rows, .cols = tensor.cols};
  const double frame = static_cast<double>(c.max_frame_bytes(desc));
  const double peers = nodes_ - 1.0;
  const bool sums = c.summable() && c.max_summands() >= nodes_;
  const bool ring = sums && c.rounds() == 1;
  const double wire_bytes = ring ? 2.0 * peers / nodes_ * frame : peers * c.rounds() * frame;
  const double decodes = sums ? 1.0 : static_cast<double>(nodes_);

  const CodecSpeed* speed = speed_of(codec.id);
  const double encode_rate = speed ? speed->encode_bytes_per_second : default_bytes_per_second_;
  const double decode_rate = speed ? speed->decode_bytes_per_second : default_bytes_per_second_;
  const double raw_bytes = static_cast<double>(tensor.elements) * sizeof(float);
  return CodecCost{
      .wire_bytes = wire_bytes,
      .wire_seconds = wire_bytes / bottleneck_goodput_,
      .codec_seconds = raw_bytes / encode_rate + decodes * raw_bytes / decode_rate,
  };
}

const CodecSpeed* CostModel::speed_of(CodecId codec) const {
  const std::string_view name = codec_name(codec);
  const auto found = std::find_if(speeds_.begin(), speeds_.end(),
                                  [&](const CodecSpeed& s) { return s.codec == name; });
  return found == speeds_.end() ? nullptr : &*found;
}

}  // namespace gradgate::control
