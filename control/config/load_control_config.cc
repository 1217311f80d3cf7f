// load_control_config and parse_control_config: the file, then the environment, then --set, then
// the rules between keys and the policy settings; every problem of every stage in one Status.
#include "common/config/config_errors.h"
#include "common/config/config_source.h"
#include "common/config/key_table.h"
#include "common/config/yaml_sections.h"
#include "control/config/control_config.h"
#include "control/config/control_keys.h"

namespace gradgate::control {
namespace {

using config::ConfigErrors;
using config::yaml_location;

void store(const ControlKey& key, const YAML::Node& value, std::string_view origin,
           ControlConfig& config, ConfigErrors& errors) {
  const Status stored = key.store(config, value);
  if (stored.ok()) return;
  // List keys report the bad entry as "[2]: ...": part of the key path.
  const std::string& message = stored.message();
  if (message.starts_with('[')) {
    const auto end = message.find(": ");
    errors.add(origin, std::string(key.path) + message.substr(0, end),
               message.substr(end + 2) + yaml_location(value.Mark()));
    return;
  }
  errors.add(origin, key.path, message + yaml_location(value.Mark()));
}

void read_file_text(const std::string& text, std::string_view origin, ControlConfig& config,
                    ConfigErrors& errors) {
  config::read_yaml_sections(
      text, origin, control_keys(),
      [&](const ControlKey& key, const YAML::Node& value) {
        store(key, value, origin, config, errors);
      },
      errors);
}

// An override's text as the YAML value of `key`: flow text for list keys, the text itself for
// the others (so that "*.bias" or "a#b" mean what they say).
void store_override(const ControlKey& key, const std::string& text, std::string_view origin,
                    ControlConfig& config, ConfigErrors& errors) {
  if (!key.is_list) return store(key, YAML::Node(text), origin, config, errors);
  try {
    store(key, YAML::Load(text), origin, config, errors);
  } catch (const YAML::Exception& e) {
    errors.add(origin, key.path, "expected YAML flow text such as [a, b]: " + e.msg);
  }
}

// GRADGATE_<SECTION>_<KEY>; a variable of a known section that names no key is an error (a typo
// must not be ignored), other GRADGATE_ variables are not configuration.
void apply_env(const std::map<std::string, std::string>& env, ControlConfig& config,
               ConfigErrors& errors) {
  for (const auto& variable : config::env_overrides(control_keys(), env)) {
    if (!variable.spelled_as_key) {
      errors.add_general(variable.origin, "names no configuration key");
    } else {
      store_override(*variable.key, std::string(variable.value), variable.origin, config, errors);
    }
  }
}

void apply_set(const std::vector<std::string>& overrides, ControlConfig& config,
               ConfigErrors& errors) {
  config::for_each_set_override(
      overrides, errors,
      [&](const std::string& origin, const std::string& path, std::string_view value) {
        const ControlKey* key = config::find_key(control_keys(), path);
        if (key == nullptr) return errors.add(origin, path, "unknown key");
        store_override(*key, std::string(value), origin, config, errors);
      });
}

// The rules between keys and the policy settings (make_policy checks those, naming the field).
void check(const ControlConfig& config, std::string_view origin, ConfigErrors& errors) {
  if (!errors.failed("nodes.stale_after_ms") && !errors.failed("nodes.report_interval_ms") &&
      config.stale_after < config.report_interval) {
    errors.add(origin, "nodes.stale_after_ms",
               "must be at least nodes.report_interval_ms, or every node flaps to stale");
  }
  if (!errors.failed("nodes.forget_after_ms") && !errors.failed("nodes.stale_after_ms") &&
      config.forget_after.count() != 0 && config.forget_after < config.stale_after) {
    errors.add(origin, "nodes.forget_after_ms",
               "must be 0 (never forget) or at least nodes.stale_after_ms");
  }
  if (errors.failed("policy.policy") || errors.failed("policy.ladder") ||
      errors.failed("policy.rules")) {
    return;
  }
  auto policy = make_policy(config.policy);
  if (policy.ok()) return;
  const std::string message = policy.status().message();
  // make_policy names the setting first ("ladder[3]: ..."; "name: ..." is policy.policy).
  const auto colon = message.find(": ");
  std::string field = message.substr(0, colon);
  if (field == "name") field = "policy";
  errors.add(origin, "policy." + field, message.substr(colon + 2));
}

}  // namespace

Result<ControlConfig> parse_control_config(const std::string& yaml, const std::string& origin,
                                           const std::map<std::string, std::string>& env,
                                           const std::vector<std::string>& overrides) {
  ControlConfig config;
  ConfigErrors errors;
  read_file_text(yaml, origin, config, errors);
  apply_env(env, config, errors);
  apply_set(overrides, config, errors);
  check(config, origin, errors);
  if (!errors.empty()) return Status(ErrorCode::kInvalidArgument, errors.joined());
  return config;
}

Result<ControlConfig> load_control_config(const std::string& path,
                                          const std::vector<std::string>& overrides) {
  auto text = config::read_config_file(path);
  if (!text.ok()) return text.status();
  return parse_control_config(*text, path, config::process_environment(), overrides);
}

}  // namespace gradgate::control
