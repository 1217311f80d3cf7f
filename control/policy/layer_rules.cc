#include "control/policy/layer_rules.h"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>

namespace gradgate::control {
namespace {

Status invalid(const std::string& field, const std::string& what) {
  return Status(ErrorCode::kInvalidArgument, field + ": " + what);
}

bool is_density(double value) { return std::isfinite(value) && value > 0.0 && value <= 1.0; }

// `*` also crosses dots: one glob can name a layer of every block.
bool glob_matches(const std::string& glob, const std::string& name) {
  return fnmatch(glob.c_str(), name.c_str(), 0) == 0;
}

}  // namespace

Result<std::vector<ParsedRule>> parse_layer_rules(const std::vector<LayerRule>& rules) {
  std::vector<ParsedRule> parsed;
  for (size_t i = 0; i < rules.size(); ++i) {
    const LayerRule& rule = rules[i];
    const std::string field = "rules[" + std::to_string(i) + "]";
    if (rule.glob.empty()) return invalid(field + ".glob", "must not be empty");
    if (!rule.codec && !rule.min_density && !rule.max_density) {
      return invalid(field, "sets neither a codec nor density bounds");
    }
    ParsedRule out;
    out.glob = rule.glob;
    if (rule.codec) {
      auto codec = kernels::parse_codec_spec(*rule.codec);
      if (!codec.ok()) return invalid(field + ".codec", codec.status().message());
      out.codec = *codec;
    }
    if (rule.min_density) {
      if (!is_density(*rule.min_density))
        return invalid(field + ".min_density", "must be in (0, 1]");
      out.min_density = *rule.min_density;
    }
    if (rule.max_density) {
      if (!is_density(*rule.max_density))
        return invalid(field + ".max_density", "must be in (0, 1]");
      out.max_density = *rule.max_density;
    }
    if (out.min_density > out.max_density) {
      return invalid(field + ".min_density", "is above max_density");
    }
    parsed.push_back(std::move(out));
  }
  return parsed;
}

const ParsedRule* find_layer_rule(const std::vector<ParsedRule>& rules, std::string_view tensor) {
  const std::string name(tensor);
  const auto match = std::find_if(rules.begin(), rules.end(), [&](const ParsedRule& rule) {
    return glob_matches(rule.glob, name);
  });
  return match == rules.end() ? nullptr : &*match;
}

std::vector<std::string> unused_layer_rules(const std::vector<LayerRule>& rules,
                                            const std::vector<TensorSample>& tensors) {
  std::vector<bool> used(rules.size(), false);
  for (const TensorSample& tensor : tensors) {
    const auto first = std::find_if(rules.begin(), rules.end(), [&](const LayerRule& rule) {
      return glob_matches(rule.glob, tensor.name);
    });
    if (first != rules.end()) used[first - rules.begin()] = true;
  }
  std::vector<std::string> unused;
  for (size_t i = 0; i < rules.size(); ++i) {
    if (!used[i]) unused.push_back(rules[i].glob);
  }
  return unused;
}

kernels::CodecParams apply_layer_rule(const ParsedRule& rule, const kernels::CodecParams& chosen) {
  kernels::CodecParams out = rule.codec.value_or(chosen);
  if (has_density(out)) out.density = std::clamp(out.density, rule.min_density, rule.max_density);
  return out;
}

bool has_density(const kernels::CodecParams& codec) {
  return codec.id == CodecId::kTopk || codec.id == CodecId::kRandomk;
}

}  // namespace gradgate::control
