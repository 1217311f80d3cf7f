#include "control/api/settings_json.h"

#include <cctype>

namespace gradgate::control {
namespace {

using http::JsonObject;
using http::NumberRange;

constexpr NumberRange kFraction{.min = 0, .exclusive_min = true, .max = 1};

nlohmann::json rule_json(const LayerRule& rule) {
  nlohmann::json json = {{"glob", rule.glob}};
  if (rule.codec) json["codec"] = *rule.codec;
  if (rule.min_density) json["min_density"] = *rule.min_density;
  if (rule.max_density) json["max_density"] = *rule.max_density;
  return json;
}

std::vector<LayerRule> read_rules(const JsonObject& root, const std::vector<LayerRule>& defaults) {
  const auto objects = root.optional_objects("rules");
  if (!objects) return defaults;
  std::vector<LayerRule> rules;
  for (const JsonObject& object : *objects) {
    LayerRule rule;
    rule.glob = object.string("glob").value_or("");
    rule.codec = object.optional_string("codec");
    rule.min_density = object.optional_number("min_density", kFraction);
    rule.max_density = object.optional_number("max_density", kFraction);
    rules.push_back(std::move(rule));
  }
  return rules;
}

}  // namespace

nlohmann::json settings_json(const PolicySettings& settings) {
  nlohmann::json rules = nlohmann::json::array();
  for (const LayerRule& rule : settings.rules) rules.push_back(rule_json(rule));
  return {
      {"policy", settings.name},
      {"default_codec", settings.default_codec},
      {"target_communicate_seconds", settings.target_communicate_seconds},
      {"warmup_steps", settings.warmup_steps},
      {"min_compress_elements", settings.min_compress_elements},
      {"ladder", settings.ladder},
      {"traffic_budget", settings.traffic_budget ? nlohmann::json(*settings.traffic_budget)
                                                 : nlohmann::json(nullptr)},
      {"min_keep_fraction", settings.min_keep_fraction},
      {"default_codec_bytes_per_second", settings.default_codec_bytes_per_second},
      {"rules", std::move(rules)},
  };
}

std::optional<http::BodyError> read_settings(std::string_view body, const PolicySettings& defaults,
                                             PolicySettings& settings) {
  http::JsonBody json(body);
  const JsonObject root = json.root();
  settings = defaults;
  settings.name =
      root.string("policy", {"static", "bandwidth", "dagc-r", "dagc-a"}).value_or(defaults.name);
  settings.default_codec = root.optional_string("default_codec").value_or(defaults.default_codec);
  settings.target_communicate_seconds =
      root.optional_number("target_communicate_seconds", {.min = 0, .exclusive_min = true})
          .value_or(defaults.target_communicate_seconds);
  settings.warmup_steps =
      static_cast<uint64_t>(root.optional_integer("warmup_steps", {.min = 0})
                                .value_or(static_cast<int64_t>(defaults.warmup_steps)));
  settings.min_compress_elements =
      static_cast<uint64_t>(root.optional_integer("min_compress_elements", {.min = 0})
                                .value_or(static_cast<int64_t>(defaults.min_compress_elements)));
  settings.ladder = root.optional_strings("ladder").value_or(defaults.ladder);
  if (settings.ladder.empty()) root.reject("ladder", "needs at least one codec");
  if (!root.is_null("traffic_budget")) {
    const auto budget = root.optional_number("traffic_budget", kFraction);
    settings.traffic_budget = budget ? budget : defaults.traffic_budget;
  } else {
    settings.traffic_budget.reset();
  }
  settings.min_keep_fraction =
      root.optional_number("min_keep_fraction", kFraction).value_or(defaults.min_keep_fraction);
  settings.default_codec_bytes_per_second =
      root.optional_number("default_codec_bytes_per_second", {.min = 0, .exclusive_min = true})
          .value_or(defaults.default_codec_bytes_per_second);
  settings.rules = read_rules(root, defaults.rules);
  return json.finish();
}

std::optional<http::BodyError> read_budget(std::string_view body, std::optional<double>& budget) {
  http::JsonBody json(body);
  const JsonObject root = json.root();
  budget = root.is_null("traffic_budget") ? std::nullopt : root.number("traffic_budget", kFraction);
  return json.finish();
}

std::string settings_pointer(std::string_view message) {
  const std::string_view field = message.substr(0, message.find(": "));
  if (field == "name") return "/policy";
  std::string pointer = "/";
  for (const char c : field) {
    if (c == '[' || c == '.') {
      pointer += '/';
    } else if (c != ']') {
      pointer += c;
    }
  }
  return pointer;
}

}  // namespace gradgate::control
