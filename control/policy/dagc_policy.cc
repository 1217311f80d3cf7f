#include <algorithm>
#include <optional>
#include <vector>

#include "control/policy/ladder_plan.h"
#include "control/policy/policies.h"

namespace gradgate::control {
namespace {

// The data volume of every node, or nothing while a node has no sample.
std::optional<std::vector<double>> node_weights(const Measurements& measurements) {
  if (measurements.node_samples.size() != measurements.nodes) return std::nullopt;
  std::vector<double> weights(measurements.nodes);
  for (const NodeSample& sample : measurements.node_samples) {
    weights[sample.node] = sample.data_volume;
  }
  return weights;
}

// With a traffic budget the job codec is top-k at that density, with the other parameters of the
// ladder's last top-k entry (topk's defaults when the ladder has none).
kernels::CodecParams budget_codec(const PolicyConfig& config, double budget) {
  const auto last_topk =
      std::find_if(config.ladder.rbegin(), config.ladder.rend(),
                   [](const kernels::CodecParams& codec) { return codec.id == CodecId::kTopk; });
  kernels::CodecParams codec =
      last_topk != config.ladder.rend() ? *last_topk : kernels::CodecParams{.id = CodecId::kTopk};
  codec.density = budget;
  return codec;
}

// Only top-k splits: random-k frames add up only when every gateway keeps the same indices, and a
// codec a rule forces is kept as the rule says.
bool splits(const TensorChoice& choice) {
  return choice.codec.id == CodecId::kTopk && !(choice.rule != nullptr && choice.rule->codec);
}

// The rule's bounds, and min_keep_fraction as a floor that never exceeds the mean density (above
// it the budget could not be met).
KeepBounds bounds_of(const PolicyConfig& config, const TensorChoice& choice) {
  const double rule_lo = choice.rule != nullptr ? choice.rule->min_density : 0.0;
  const double rule_hi = choice.rule != nullptr ? choice.rule->max_density : 1.0;
  return {.lo = std::min(std::max(config.min_keep_fraction, rule_lo), choice.codec.density),
          .hi = rule_hi};
}

struct NodeCodecs {
  std::vector<kernels::CodecParams> per_node;
  std::string reason;
};

class DagcPolicy final : public Policy {
 public:
  DagcPolicy(PolicyConfig config, DagcVariant variant)
      : config_(std::move(config)), variant_(variant) {}
  std::string_view name() const override {
    return variant_ == DagcVariant::kExact ? "dagc-r" : "dagc-a";
  }

 private:
  Result<PolicyDecision> decide_checked(const Measurements& measurements) const override {
    const auto cost = CostModel::for_job(measurements, config_.default_codec_bytes_per_second);
    if (!cost) return fallback_decision(config_, measurements);
    const std::vector<kernels::CodecParams> budget_ladder =
        config_.traffic_budget
            ? std::vector<kernels::CodecParams>{budget_codec(config_, *config_.traffic_budget)}
            : config_.ladder;
    auto plan = plan_ladder(config_, measurements, *cost, budget_ladder);
    if (!plan.ok()) return plan.status();
    const auto weights = node_weights(measurements);

    PolicyDecision decision;
    std::vector<double> node_seconds(measurements.nodes, 0.0);
    for (size_t t = 0; t < plan->choices.size(); ++t) {
      auto codecs = node_codecs(plan->choices[t], weights, measurements.nodes);
      if (!codecs.ok()) return codecs.status();
      TensorDecision tensor{
          .tensor = measurements.tensors[t].name, .codec_per_node = {}, .reason = codecs->reason};
      for (size_t node = 0; node < codecs->per_node.size(); ++node) {
        auto node_cost = cost->cost(codecs->per_node[node], measurements.tensors[t]);
        if (!node_cost.ok()) return node_cost.status();
        node_seconds[node] += node_cost->wire_seconds;
        tensor.codec_per_node.push_back(kernels::format_codec_spec(codecs->per_node[node]));
      }
      decision.tensors.push_back(std::move(tensor));
    }
    decision.predicted_communicate_seconds =
        *std::max_element(node_seconds.begin(), node_seconds.end());
    return decision;
  }

  // The codec of each node for a tensor whose uniform choice is `choice`.
  Result<NodeCodecs> node_codecs(const TensorChoice& choice,
                                 const std::optional<std::vector<double>>& weights,
                                 uint32_t nodes) const {
    NodeCodecs codecs{.per_node = std::vector<kernels::CodecParams>(nodes, choice.codec),
                      .reason = choice.reason};
    if (!splits(choice)) return codecs;
    if (!weights) {
      codecs.reason = "no data-volume sample";
      return codecs;
    }
    auto keep = allocate_keep_fractions(*weights, choice.codec.density, bounds_of(config_, choice),
                                        variant_);
    if (!keep.ok()) return keep.status();
    for (size_t node = 0; node < nodes; ++node) codecs.per_node[node].density = (*keep)[node];
    codecs.reason = "dagc";
    return codecs;
  }

  PolicyConfig config_;
  DagcVariant variant_;
};

}  // namespace

std::unique_ptr<Policy> make_dagc_policy(PolicyConfig config, DagcVariant variant) {
  return std::make_unique<DagcPolicy>(std::move(config), variant);
}

}  // namespace gradgate::control
