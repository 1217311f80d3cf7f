#include "control/config/control_keys.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "common/config/value_text.h"
#include "common/http/connection_limit.h"
#include "common/net/endpoint.h"

namespace gradgate::control {
namespace {

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kMaxMilliseconds = 24 * 60 * 60 * 1000;  // one day: no interval is longer

Status invalid(std::string message) {
  return Status(ErrorCode::kInvalidArgument, std::move(message));
}

Result<std::string> scalar(const YAML::Node& value) {
  if (value.IsScalar()) return value.Scalar();
  if (value.IsNull()) return std::string();
  return invalid(std::string("must be a single value, not ") +
                 (value.IsSequence() ? "a list" : "a mapping"));
}

Result<uint64_t> unsigned_value(const YAML::Node& value, uint64_t max) {
  auto text = scalar(value);
  if (!text.ok()) return text.status();
  return config::parse_unsigned(*text, max);
}

Result<double> number_value(const YAML::Node& value) {
  auto text = scalar(value);
  if (!text.ok()) return text.status();
  char* end = nullptr;
  const double number = std::strtod(text->c_str(), &end);
  if (text->empty() || end != text->c_str() + text->size() || !std::isfinite(number)) {
    return invalid("expected a finite number, got \"" + *text + "\"");
  }
  return number;
}

Result<std::string> one_of(const YAML::Node& value, std::initializer_list<std::string_view> names) {
  auto text = scalar(value);
  if (!text.ok()) return text.status();
  std::string expected;
  for (std::string_view name : names) {
    if (*text == name) return text;
    if (!expected.empty()) expected += " | ";
    expected += name;
  }
  return invalid("expected " + expected + ", got \"" + *text + "\"");
}

// "[i]", the part of a key path that names a list entry.
std::string entry(std::size_t index) {
  std::string text(1, '[');
  text += std::to_string(index);
  text += ']';
  return text;
}

Result<std::vector<std::string>> string_list(const YAML::Node& value) {
  if (!value.IsSequence()) return invalid("must be a list of single values");
  std::vector<std::string> items;
  for (std::size_t i = 0; i < value.size(); ++i) {
    auto item = scalar(value[i]);
    if (!item.ok()) return invalid(entry(i) + ": " + item.status().message());
    items.push_back(*std::move(item));
  }
  return items;
}

template <auto Field, uint64_t Min, uint64_t Max>
Status store_unsigned(ControlConfig& config, const YAML::Node& value) {
  auto number = unsigned_value(value, Max);
  if (!number.ok()) return number.status();
  if (*number < Min) return invalid("must be at least " + std::to_string(Min));
  config.*Field = static_cast<std::remove_reference_t<decltype(config.*Field)>>(*number);
  return {};
}

template <auto Field, uint64_t Min>
Status store_milliseconds(ControlConfig& config, const YAML::Node& value) {
  auto number = unsigned_value(value, kMaxMilliseconds);
  if (!number.ok()) return number.status();
  if (*number < Min) return invalid("must be at least " + std::to_string(Min) + " ms");
  config.*Field = std::chrono::milliseconds(static_cast<int64_t>(*number));
  return {};
}

template <auto Field>
Status store_string(ControlConfig& config, const YAML::Node& value) {
  auto text = scalar(value);
  if (!text.ok()) return text.status();
  config.*Field = *std::move(text);
  return {};
}

Status store_listen(ControlConfig& config, const YAML::Node& value) {
  auto text = scalar(value);
  if (!text.ok()) return text.status();
  auto endpoint = config::parse_endpoint(*text);
  if (!endpoint.ok()) return endpoint.status();
  config.listen_host = endpoint->host;
  config.listen_port = endpoint->port;
  return {};
}

Status store_policy_name(ControlConfig& config, const YAML::Node& value) {
  auto name = one_of(value, {"static", "bandwidth", "dagc-r", "dagc-a"});
  if (!name.ok()) return name.status();
  config.policy.name = *std::move(name);
  return {};
}

template <auto Field>
Status store_policy_string(ControlConfig& config, const YAML::Node& value) {
  auto text = scalar(value);
  if (!text.ok()) return text.status();
  config.policy.*Field = *std::move(text);
  return {};
}

template <auto Field>
Status store_policy_number(ControlConfig& config, const YAML::Node& value) {
  auto number = number_value(value);
  if (!number.ok()) return number.status();
  config.policy.*Field = *number;
  return {};
}

// The policy's counts, at most what PUT /v1/policy takes (and policy.settings_file keeps): 2^63
// - 1.
template <auto Field>
Status store_policy_unsigned(ControlConfig& config, const YAML::Node& value) {
  auto number = unsigned_value(value, static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
  if (!number.ok()) return number.status();
  config.policy.*Field = *number;
  return {};
}

Status store_traffic_budget(ControlConfig& config, const YAML::Node& value) {
  const bool is_null =
      value.IsNull() || (value.IsScalar() && (value.Scalar() == "null" || value.Scalar() == "~" ||
                                              value.Scalar().empty()));
  if (is_null) {
    config.policy.traffic_budget.reset();
    return {};
  }
  auto number = number_value(value);
  if (!number.ok()) return number.status();
  config.policy.traffic_budget = *number;
  return {};
}

Status store_ladder(ControlConfig& config, const YAML::Node& value) {
  auto ladder = string_list(value);
  if (!ladder.ok()) return ladder.status();
  config.policy.ladder = *std::move(ladder);
  return {};
}

// One rule: a mapping of glob (required), codec, min_density, max_density.
Result<LayerRule> read_rule(const YAML::Node& value) {
  if (!value.IsMap())
    return invalid("must be a mapping with glob, codec, min_density, max_density");
  LayerRule rule;
  bool has_glob = false;
  for (const auto& member : value) {
    const std::string key = member.first.Scalar();
    auto fail = [&](const Status& status) { return invalid("." + key + ": " + status.message()); };
    if (key == "glob" || key == "codec") {
      auto text = scalar(member.second);
      if (!text.ok()) return fail(text.status());
      if (key == "glob") {
        rule.glob = *std::move(text);
        has_glob = true;
      } else {
        rule.codec = *std::move(text);
      }
    } else if (key == "min_density" || key == "max_density") {
      auto number = number_value(member.second);
      if (!number.ok()) return fail(number.status());
      (key == "min_density" ? rule.min_density : rule.max_density) = *number;
    } else {
      return invalid("." + key + ": unknown key (glob, codec, min_density, max_density)");
    }
  }
  if (!has_glob) return invalid(".glob: missing");
  return rule;
}

Status store_rules(ControlConfig& config, const YAML::Node& value) {
  if (!value.IsSequence()) return invalid("must be a list of rules");
  std::vector<LayerRule> rules;
  for (std::size_t i = 0; i < value.size(); ++i) {
    auto rule = read_rule(value[i]);
    if (!rule.ok()) {
      // A member's problem names it (".glob: missing"); the rule's own follows ": ".
      const std::string problem = rule.status().message();
      return invalid(entry(i) + (problem.starts_with('.') ? "" : ": ") + problem);
    }
    rules.push_back(*std::move(rule));
  }
  config.policy.rules = std::move(rules);
  return {};
}

Status store_lead_seconds(ControlConfig& config, const YAML::Node& value) {
  auto number = number_value(value);
  if (!number.ok()) return number.status();
  if (*number < 0) return invalid("must be >= 0");
  config.lead_seconds = *number;
  return {};
}

Status store_log_level(ControlConfig& config, const YAML::Node& value) {
  auto level = one_of(value, {"trace", "debug", "info", "warn", "error"});
  if (!level.ok()) return level.status();
  config.log_level = *std::move(level);
  return {};
}

Status store_log_format(ControlConfig& config, const YAML::Node& value) {
  auto format = one_of(value, {"text", "json"});
  if (!format.ok()) return format.status();
  config.log_format = *std::move(format);
  return {};
}

using C = ControlConfig;
using P = PolicySettings;
constexpr uint64_t kMaxBodyBytes = uint64_t{1} << 30;

constexpr ControlKey kKeys[] = {
    {"server.listen", false, store_listen},
    {"server.max_body_bytes", false, store_unsigned<&C::max_body_bytes, 1, kMaxBodyBytes>},
    {"server.request_timeout_ms", false, store_milliseconds<&C::request_timeout, 1>},
    {"server.max_connections", false,
     store_unsigned<&C::max_connections, 1, http::kMaxConnectionsLimit>},
    {"auth.token_file", false, store_string<&C::token_file>},
    {"auth.token_env", false, store_string<&C::token_env>},
    {"nodes.report_interval_ms", false, store_milliseconds<&C::report_interval, 1>},
    {"nodes.stale_after_ms", false, store_milliseconds<&C::stale_after, 1>},
    {"nodes.forget_after_ms", false, store_milliseconds<&C::forget_after, 0>},
    {"nodes.max_jobs", false, store_unsigned<&C::max_jobs, 1, 1u << 20>},
    {"policy.policy", false, store_policy_name},
    {"policy.default_codec", false, store_policy_string<&P::default_codec>},
    {"policy.target_communicate_seconds", false,
     store_policy_number<&P::target_communicate_seconds>},
    {"policy.warmup_steps", false, store_policy_unsigned<&P::warmup_steps>},
    {"policy.min_compress_elements", false, store_policy_unsigned<&P::min_compress_elements>},
    {"policy.ladder", true, store_ladder},
    {"policy.traffic_budget", false, store_traffic_budget},
    {"policy.min_keep_fraction", false, store_policy_number<&P::min_keep_fraction>},
    {"policy.rules", true, store_rules},
    {"policy.lead_seconds", false, store_lead_seconds},
    {"policy.min_lead_steps", false, store_unsigned<&C::min_lead_steps, 0, kU64Max>},
    {"policy.min_interval_ms", false, store_milliseconds<&C::min_interval, 0>},
    {"policy.settings_file", false, store_string<&C::settings_file>},
    {"log.level", false, store_log_level},
    {"log.format", false, store_log_format},
};

}  // namespace

std::span<const ControlKey> control_keys() { return kKeys; }

}  // namespace gradgate::control
