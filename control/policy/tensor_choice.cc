#include "control/policy/tensor_choice.h"

namespace gradgate::control {
namespace {

constexpr kernels::CodecParams kDense{};

Result<bool> pays_off(const CostModel& cost, const kernels::CodecParams& codec,
                      const TensorSample& tensor) {
  auto dense = cost.cost(kDense, tensor);
  if (!dense.ok()) return dense.status();
  auto compressed = cost.cost(codec, tensor);
  if (!compressed.ok()) return compressed.status();
  return compressed->codec_seconds < dense->wire_seconds - compressed->wire_seconds;
}

}  // namespace

Result<TensorChoice> choose_tensor_codec(const PolicyConfig& config, uint64_t step,
                                         const TensorSample& tensor,
                                         const kernels::CodecParams& job_codec,
                                         const std::string& job_reason, const CostModel* cost) {
  TensorChoice choice{.codec = job_codec, .reason = job_reason};
  if (step < config.warmup_steps) {
    choice = {.codec = kDense, .reason = "warm-up"};
  } else if (tensor.elements < config.min_compress_elements) {
    choice = {.codec = kDense, .reason = "small tensor"};
  } else if (cost != nullptr && job_codec.id != CodecId::kNone) {
    auto pays = pays_off(*cost, job_codec, tensor);
    if (!pays.ok()) return pays.status();
    if (!*pays) {
      choice = {.codec = kDense, .reason = "break-even: compression slower than the link"};
    }
  }
  choice.rule = find_layer_rule(config.rules, tensor.name);
  if (choice.rule != nullptr) {
    const kernels::CodecParams ruled = apply_layer_rule(*choice.rule, choice.codec);
    if (choice.rule->codec ||
        kernels::format_codec_spec(ruled) != kernels::format_codec_spec(choice.codec)) {
      choice.codec = ruled;
      choice.reason = "rule " + choice.rule->glob;
    }
  }
  return choice;
}

Result<std::vector<TensorChoice>> choose_codecs(const PolicyConfig& config,
                                                const Measurements& measurements,
                                                const kernels::CodecParams& job_codec,
                                                const std::string& job_reason,
                                                const CostModel* cost) {
  std::vector<TensorChoice> choices;
  choices.reserve(measurements.tensors.size());
  for (const TensorSample& tensor : measurements.tensors) {
    auto choice =
        choose_tensor_codec(config, measurements.step, tensor, job_codec, job_reason, cost);
    if (!choice.ok()) return choice.status();
    choices.push_back(std::move(*choice));
  }
  return choices;
}

Result<double> communicate_seconds(const CostModel& cost, const Measurements& measurements,
                                   const std::vector<TensorChoice>& choices) {
  double seconds = 0.0;
  for (size_t i = 0; i < choices.size(); ++i) {
    auto tensor_cost = cost.cost(choices[i].codec, measurements.tensors[i]);
    if (!tensor_cost.ok()) return tensor_cost.status();
    seconds += tensor_cost->wire_seconds;
  }
  return seconds;
}

PolicyDecision uniform_decision(const Measurements& measurements,
                                const std::vector<TensorChoice>& choices,
                                std::optional<double> communicate_seconds) {
  PolicyDecision decision;
  decision.predicted_communicate_seconds = communicate_seconds;
  decision.tensors.reserve(choices.size());
  for (size_t i = 0; i < choices.size(); ++i) {
    decision.tensors.push_back(TensorDecision{
        .tensor = measurements.tensors[i].name,
        .codec_per_node = std::vector<std::string>(measurements.nodes,
                                                   kernels::format_codec_spec(choices[i].codec)),
        .reason = choices[i].reason,
    });
  }
  return decision;
}

}  // namespace gradgate::control
