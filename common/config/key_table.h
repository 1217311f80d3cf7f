// The shape of a configuration's key table, the same for the gateway's and the controller's: keys
// named "section.key", each with how its value is stored, found by path, grouped by section, and
// named GRADGATE_SECTION_KEY in the environment. A loader keeps its own table and rules; reading
// files, variables and --set texts against a table is shared.
#pragma once

#include <algorithm>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gradgate/base/status.h"

namespace gradgate::config {

/// One key of a `Config`. `Value` is what `store` parses: the text of a YAML scalar (the
/// gateway's keys, lists stored entry by entry after `clear`) or a whole YAML node (the
/// controller's keys, lists stored at once).
template <typename Config, typename Value>
struct Key {
  std::string_view path;  // "section.key"
  bool is_list;
  /// Parses `value` and assigns it; kInvalidArgument says what was expected.
  Status (*store)(Config& config, Value value);
  /// Empties a list key before its entries are stored one by one; nullptr otherwise.
  void (*clear)(Config& config) = nullptr;
};

/// The section of a key path: "job" for "job.node_rank".
inline std::string_view section_of(std::string_view path) { return path.substr(0, path.find('.')); }

/// The key named `path`, or nullptr.
template <typename K>
const K* find_key(std::span<const K> keys, std::string_view path) {
  for (const auto& key : keys) {
    if (key.path == path) return &key;
  }
  return nullptr;
}

/// The sections of the table, each once, in the order of the table: job, ingress, ...
template <typename K>
std::vector<std::string_view> sections_of(std::span<const K> keys) {
  std::vector<std::string_view> sections;
  for (const auto& key : keys) {
    const std::string_view section = section_of(key.path);
    if (std::find(sections.begin(), sections.end(), section) == sections.end()) {
      sections.push_back(section);
    }
  }
  return sections;
}

/// "GRADGATE_" + the path upper-cased, '.' as '_': GRADGATE_JOB_NODE_RANK.
std::string env_name(std::string_view path);

/// The key path a GRADGATE_* variable means when it starts with a section of `keys`
/// ("job.node_rank" for GRADGATE_JOB_NODE_RANK, "job.typo" for GRADGATE_JOB_TYPO); "" when the
/// variable is not configuration (GRADGATE_LIBRARY).
std::string env_key_path(std::string_view name, std::span<const std::string_view> sections);

/// One GRADGATE_* variable that is configuration (starts with a section of the table).
template <typename K>
struct EnvOverride {
  std::string origin;      // "environment GRADGATE_JOB_NODE_RANK", for messages
  std::string path;        // the key path the variable means: "job.node_rank"
  std::string_view value;  // the variable's text
  const K* key;            // the key of `path`; nullptr when the table has none
  bool spelled_as_key;     // the variable is exactly env_name(key->path), not a variant of it
};

/// The variables of `env` that are configuration of `keys`, in the order of their names.
template <typename K>
std::vector<EnvOverride<K>> env_overrides(std::span<const K> keys,
                                          const std::map<std::string, std::string>& env) {
  const std::vector<std::string_view> sections = sections_of(keys);
  std::vector<EnvOverride<K>> overrides;
  for (const auto& [name, value] : env) {
    std::string path = env_key_path(name, sections);
    if (path.empty()) continue;
    const K* key = find_key(keys, path);
    overrides.push_back({"environment " + name, std::move(path), value, key,
                         key != nullptr && env_name(key->path) == name});
  }
  return overrides;
}

}  // namespace gradgate::config
