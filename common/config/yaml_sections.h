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

#include "common/config/config_errors.h"

namespace gradgate::config {

/// What the walk needs of a table: its sections (for the top level's message and unknown
/// sections), whether a path names a key, and what to do with a known key's value.
struct SectionReader {
  std::span<const std::string_view> sections;
  std::function<bool(const std::string& path)> is_key;
  std::function<void(const std::string& path, const YAML::Node& value)> read_value;
};

/// Walks `text` (from `origin`, for messages), calling reader.read_value once per known key, in
/// the order written; problems go to `errors`.
void read_yaml_sections(const std::string& text, std::string_view origin,
                        const SectionReader& reader, ConfigErrors& errors);

/// "a list", "a mapping", "empty" or "a single value": a node's shape, for messages.
std::string shape_name(const YAML::Node& node);

}  // namespace gradgate::config
