// Per-layer rules by tensor-name glob: reading them from the settings, finding the rule of a
// tensor, and applying it to a codec the policy chose (a forced codec wins; density bounds clamp
// topk/randomk densities).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "control/policy/policy.h"
#include "gradgate/kernels/codec_spec.h"

namespace gradgate::control {

/// A LayerRule with its codec parsed and its bounds filled in ([0, 1] when unset).
struct ParsedRule {
  std::string glob;
  std::optional<kernels::CodecParams> codec;
  double min_density = 0.0;
  double max_density = 1.0;
};

/// Checks and parses the rules; kInvalidArgument names the field ("rules[2].max_density").
Result<std::vector<ParsedRule>> parse_layer_rules(const std::vector<LayerRule>& rules);

/// The first rule whose glob matches `tensor`, or nullptr.
const ParsedRule* find_layer_rule(const std::vector<ParsedRule>& rules, std::string_view tensor);

/// The globs of `rules` that are the first match of none of `tensors`, in rule order: a rule
/// written for names the job does not use (`*.bias` where DDP sends whole buckets), or one that
/// an earlier rule shadows. Such a rule changes nothing.
std::vector<std::string> unused_layer_rules(const std::vector<LayerRule>& rules,
                                            const std::vector<TensorSample>& tensors);

/// `chosen` after `rule`: the forced codec if the rule has one, then its density clamped into the
/// rule's bounds when it is topk or randomk.
kernels::CodecParams apply_layer_rule(const ParsedRule& rule, const kernels::CodecParams& chosen);

/// True for the codecs whose ratio is a density (topk, randomk).
bool has_density(const kernels::CodecParams& codec);

}  // namespace gradgate::control
