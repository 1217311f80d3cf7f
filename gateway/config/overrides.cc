#include "gateway/config/overrides.h"

#include <algorithm>
#include <cstddef>
#include <string_view>

#include "common/config/config_source.h"
#include "common/config/key_table.h"
#include "gateway/config/config_keys.h"

namespace gradgate::gateway {
namespace {

std::string_view trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

// Stores `value` into `key`: one text for a scalar key, a comma-separated list for a list key.
void store_override(const ConfigKey& key, std::string_view value, std::string_view origin,
                    GatewayConfig& config, config::ConfigErrors& errors) {
  if (!key.is_list) {
    const Status status = key.store(config, value);
    if (!status.ok()) errors.add(origin, key.path, status.message());
    return;
  }
  key.clear(config);
  if (trimmed(value).empty()) return;
  std::size_t index = 0;
  for (std::size_t begin = 0; begin <= value.size(); ++index) {
    const auto comma = std::min(value.find(',', begin), value.size());
    const Status status = key.store(config, trimmed(value.substr(begin, comma - begin)));
    if (!status.ok()) {
      errors.add(origin, std::string(key.path) + "[" + std::to_string(index) + "]",
                 status.message());
    }
    begin = comma + 1;
  }
}

}  // namespace

void apply_env_overrides(const std::map<std::string, std::string>& env, GatewayConfig& config,
                         config::ConfigErrors& errors) {
  for (const auto& variable : config::env_overrides(config_keys(), env)) {
    if (variable.key == nullptr) {
      errors.add(variable.origin, variable.path, "unknown key");
    } else if (!variable.spelled_as_key) {
      errors.add(variable.origin, variable.path,
                 "unknown key (the variable is " + config::env_name(variable.key->path) + ")");
    } else {
      store_override(*variable.key, variable.value, variable.origin, config, errors);
    }
  }
}

void apply_set_overrides(const std::vector<std::string>& overrides, GatewayConfig& config,
                         config::ConfigErrors& errors) {
  config::for_each_set_override(
      overrides, errors,
      [&](const std::string& origin, const std::string& path, std::string_view value) {
        const ConfigKey* key = config::find_key(config_keys(), path);
        if (key == nullptr) return errors.add(origin, path, "unknown key");
        store_override(*key, value, origin, config, errors);
      });
}

}  // namespace gradgate::gateway
