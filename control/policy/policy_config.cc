#include "control/policy/policy_config.h"

#include <cmath>

namespace gradgate::control {
namespace {

Status invalid(const std::string& field, const std::string& what) {
  return Status(ErrorCode::kInvalidArgument, field + ": " + what);
}

Result<kernels::CodecParams> parse_codec(const std::string& field, const std::string& spec) {
  auto codec = kernels::parse_codec_spec(spec);
  if (!codec.ok()) return invalid(field, codec.status().message());
  return codec;
}

bool is_fraction(double value) { return std::isfinite(value) && value > 0.0 && value <= 1.0; }
bool is_positive(double value) { return std::isfinite(value) && value > 0.0; }

}  // namespace

Result<PolicyConfig> parse_policy_settings(const PolicySettings& settings) {
  PolicyConfig config;
  config.name = settings.name;
  auto default_codec = parse_codec("default_codec", settings.default_codec);
  if (!default_codec.ok()) return default_codec.status();
  config.default_codec = *default_codec;

  if (settings.ladder.empty()) return invalid("ladder", "needs at least one codec");
  for (size_t i = 0; i < settings.ladder.size(); ++i) {
    auto codec = parse_codec("ladder[" + std::to_string(i) + "]", settings.ladder[i]);
    if (!codec.ok()) return codec.status();
    config.ladder.push_back(*codec);
  }
  if (!is_positive(settings.target_communicate_seconds)) {
    return invalid("target_communicate_seconds", "must be a positive number of seconds");
  }
  config.target_communicate_seconds = settings.target_communicate_seconds;
  config.warmup_steps = settings.warmup_steps;
  config.min_compress_elements = settings.min_compress_elements;
  if (settings.traffic_budget && !is_fraction(*settings.traffic_budget)) {
    return invalid("traffic_budget", "must be in (0, 1]");
  }
  config.traffic_budget = settings.traffic_budget;
  if (!is_fraction(settings.min_keep_fraction)) {
    return invalid("min_keep_fraction", "must be in (0, 1]");
  }
  config.min_keep_fraction = settings.min_keep_fraction;
  if (!is_positive(settings.default_codec_bytes_per_second)) {
    return invalid("default_codec_bytes_per_second", "must be a positive rate");
  }
  config.default_codec_bytes_per_second = settings.default_codec_bytes_per_second;
  auto rules = parse_layer_rules(settings.rules);
  if (!rules.ok()) return rules.status();
  config.rules = std::move(*rules);
  return config;
}

}  // namespace gradgate::control
