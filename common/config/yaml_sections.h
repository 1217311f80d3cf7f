// Reading the YAML text of a configuration against its key table: one document, a mapping of
// sections, each a mapping of keys. The gateway's and the controller's loaders share it, so both
// report a bad file the same way: every problem with its key path and line, reading going on past
// it (syntax, the top level, unknown sections and keys, sections or keys written twice, names that
// are not plain names).
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/config/config_errors.h"
#include "common/config/key_table.h"

namespace gradgate::config {

/// What the walk needs of a table, whatever its key type: its sections (for the top level's
/// message and unknown sections), the key a path names (nullptr: none), and what to do with a
/// known key's value.
struct SectionReader {
  std::span<const std::string_view> sections;
  std::function<const void*(const std::string& path)> find;
  std::function<void(const void* key, const YAML::Node& value)> read_value;
};

/// Walks `text` (from `origin`, for messages), calling reader.read_value once per known key, in
/// the order written; problems go to `errors`.
void read_yaml_sections(const std::string& text, std::string_view origin,
                        const SectionReader& reader, ConfigErrors& errors);

/// The same against a key table (key_table.h): read_value(key, value) once per known key.
template <typename K, typename ReadValue>
void read_yaml_sections(const std::string& text, std::string_view origin, std::span<const K> keys,
                        ReadValue&& read_value, ConfigErrors& errors) {
  const std::vector<std::string_view> sections = sections_of(keys);
  const SectionReader reader{
      .sections = sections,
      .find = [keys](const std::string& path) -> const void* { return find_key(keys, path); },
      .read_value =
          [&read_value](const void* key, const YAML::Node& value) {
            read_value(*static_cast<const K*>(key), value);
          },
  };
  read_yaml_sections(text, origin, reader, errors);
}

/// "a list", "a mapping", "empty" or "a single value": a node's shape, for messages.
std::string shape_name(const YAML::Node& node);

}  // namespace gradgate::config
