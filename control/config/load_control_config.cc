// load_control_config and parse_control_config: the file, then the environment, then --set, then
// the rules between keys and the policy settings; every problem of every stage in one Status.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "control/config/control_config.h"
#include "control/config/control_keys.h"
#include "gateway/config/config_errors.h"
#include "gateway/config/config_keys.h"

namespace gradgate::control {
namespace {

using gateway::ConfigErrors;

std::string location(const YAML::Mark& mark) {
  if (mark.is_null()) return "";
  return " (line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1) +
         ")";
}

void store(const ControlKey& key, const YAML::Node& value, std::string_view origin,
           ControlConfig& config, ConfigErrors& errors) {
  const Status stored = key.store(config, value);
  if (stored.ok()) return;
  // List keys report the bad entry as "[2]: ...": part of the key path.
  const std::string& message = stored.message();
  if (message.starts_with('[')) {
    const auto end = message.find(": ");
    errors.add(origin, std::string(key.path) + message.substr(0, end),
               message.substr(end + 2) + location(value.Mark()));
    return;
  }
  errors.add(origin, key.path, message + location(value.Mark()));
}

void read_file_text(const std::string& text, std::string_view origin, ControlConfig& config,
                    ConfigErrors& errors) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    errors.add_unreadable(origin, "invalid YAML: " + e.msg + location(e.mark));
    return;
  }
  if (root.IsNull()) return;
  if (!root.IsMap()) {
    errors.add_unreadable(origin,
                          "the top level must be a mapping of sections (server, auth, "
                          "nodes, policy, log)" +
                              location(root.Mark()));
    return;
  }
  std::set<std::string, std::less<>> seen;
  for (const auto& section : root) {
    const std::string name = section.first.Scalar();
    if (!is_control_section(name)) {
      errors.add(origin, name, "unknown section" + location(section.first.Mark()));
      continue;
    }
    if (section.second.IsNull()) continue;
    if (!section.second.IsMap()) {
      errors.add(origin, name, "must be a mapping of keys" + location(section.second.Mark()));
      continue;
    }
    for (const auto& entry : section.second) {
      const std::string path = name + "." + entry.first.Scalar();
      const ControlKey* key = find_control_key(path);
      if (key == nullptr) {
        errors.add(origin, path, "unknown key" + location(entry.first.Mark()));
      } else if (!seen.insert(path).second) {
        errors.add(origin, path, "appears twice" + location(entry.first.Mark()));
      } else {
        store(*key, entry.second, origin, config, errors);
      }
    }
  }
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

void apply_env(const std::map<std::string, std::string>& env, ControlConfig& config,
               ConfigErrors& errors) {
  for (const auto& [name, value] : env) {
    const ControlKey* match = nullptr;
    bool in_known_section = false;
    for (const auto& key : control_keys()) {
      const std::string_view section = key.path.substr(0, key.path.find('.'));
      in_known_section |= name.starts_with(gateway::config_env_name(section) + "_");
      if (gateway::config_env_name(key.path) == name) match = &key;
    }
    const std::string origin = "environment " + name;
    if (match != nullptr) {
      store_override(*match, value, origin, config, errors);
    } else if (in_known_section) {
      errors.add_general(origin, "names no configuration key");
    }
  }
}

void apply_set(const std::vector<std::string>& overrides, ControlConfig& config,
               ConfigErrors& errors) {
  for (const auto& text : overrides) {
    const std::string origin = "--set \"" + text + "\"";
    const auto equals = text.find('=');
    if (equals == std::string::npos) {
      errors.add_general(origin, "expected section.key=value");
      continue;
    }
    const std::string path = text.substr(0, equals);
    const ControlKey* key = find_control_key(path);
    if (key == nullptr) {
      errors.add(origin, path, "unknown key");
      continue;
    }
    store_override(*key, text.substr(equals + 1), origin, config, errors);
  }
}

// The rules between keys and the policy settings (make_policy checks those, naming the field).
void check(const ControlConfig& config, std::string_view origin, ConfigErrors& errors) {
  if (!errors.failed("nodes.stale_after_ms") && !errors.failed("nodes.report_interval_ms") &&
      config.stale_after < config.report_interval) {
    errors.add(origin, "nodes.stale_after_ms",
               "must be at least nodes.report_interval_ms, or every node flaps to stale");
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

std::map<std::string, std::string> process_environment() {
  std::map<std::string, std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const auto equals = text.find('=');
    if (equals != std::string_view::npos)
      env.emplace(text.substr(0, equals), text.substr(equals + 1));
  }
  return env;
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
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    return Status(ErrorCode::kNotFound, "config file \"" + path + "\" does not exist");
  }
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  if (!file) {
    return Status(ErrorCode::kInvalidArgument, "config file \"" + path + "\" cannot be read");
  }
  return parse_control_config(text.str(), path, process_environment(), overrides);
}

}  // namespace gradgate::control
