#include "gateway/config/yaml_reader.h"

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "gateway/config/config_keys.h"
#include "gateway/config/config_source.h"

namespace gradgate::gateway {
namespace {

std::string shape_name(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Null:
      return "empty";
    default:
      return "a single value";
  }
}

class Reader {
 public:
  Reader(std::string_view origin, GatewayConfig& config, ConfigErrors& errors)
      : origin_(origin), config_(config), errors_(errors) {}

  void read_root(const YAML::Node& root) {
    if (root.IsNull()) return;
    if (!root.IsMap()) {
      errors_.add_unreadable(
          origin_,
          "the top level must be a mapping of sections (job, ingress, "
          "compression, transport, collective, streams, admin, control, logging), not " +
              shape_name(root) + yaml_location(root.Mark()));
      return;
    }
    for (const auto& entry : root) {
      const std::string section = entry.first.Scalar();
      if (!entry.first.IsScalar()) {
        errors_.add_general(origin_, "a section name must be a plain name, not " +
                                         shape_name(entry.first) +
                                         yaml_location(entry.first.Mark()));
      } else if (!is_config_section(section)) {
        error(section, "unknown section", entry.first);
      } else if (!first_occurrence(section, entry.first)) {
        continue;
      } else if (entry.second.IsMap()) {
        read_section(section, entry.second);
      } else if (!entry.second.IsNull()) {
        error(section, "must be a mapping of keys, not " + shape_name(entry.second), entry.second);
      }
    }
  }

 private:
  void read_section(const std::string& section, const YAML::Node& keys) {
    for (const auto& entry : keys) {
      const std::string path = section + "." + entry.first.Scalar();
      const ConfigKey* key = find_config_key(path);
      if (!entry.first.IsScalar()) {
        error(section, "a key must be a plain name, not " + shape_name(entry.first), entry.first);
      } else if (key == nullptr) {
        error(path, "unknown key", entry.first);
      } else if (!first_occurrence(path, entry.first)) {
        continue;
      } else if (key->is_list) {
        read_list(*key, entry.second);
      } else if (entry.second.IsScalar()) {
        store(*key, path, entry.second);
      } else {
        error(path, "must be a single value, not " + shape_name(entry.second), entry.second);
      }
    }
  }

  void read_list(const ConfigKey& key, const YAML::Node& list) {
    const std::string path(key.path);
    if (!list.IsSequence()) {
      error(path, "must be a list, not " + shape_name(list), list);
      return;
    }
    key.clear(config_);
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string entry_path = path + "[" + std::to_string(i) + "]";
      if (list[i].IsScalar()) {
        store(key, entry_path, list[i]);
      } else {
        error(entry_path, "must be a single value, not " + shape_name(list[i]), list[i]);
      }
    }
  }

  // Records where `path` was first written; a second occurrence is an error (YAML keeps only one
  // of them, and which one is not what the writer meant to decide).
  bool first_occurrence(const std::string& path, const YAML::Node& name) {
    const auto [first, inserted] = seen_.emplace(path, name.Mark());
    if (!inserted) {
      error(path, "appears twice (first on line " + std::to_string(first->second.line + 1) + ")",
            name);
    }
    return inserted;
  }

  void store(const ConfigKey& key, const std::string& path, const YAML::Node& value) {
    const Status status = key.store(config_, value.Scalar());
    if (!status.ok()) error(path, status.message(), value);
  }

  void error(const std::string& path, const std::string& message, const YAML::Node& where) {
    errors_.add(origin_, path, message + yaml_location(where.Mark()));
  }

  std::string_view origin_;
  GatewayConfig& config_;
  ConfigErrors& errors_;
  std::map<std::string, YAML::Mark> seen_;
};

}  // namespace

void read_yaml_config(const std::string& text, std::string_view origin, GatewayConfig& config,
                      ConfigErrors& errors) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    errors.add_unreadable(origin, invalid_yaml(e));
    return;
  }
  if (documents.size() > 1) {
    errors.add_unreadable(origin, "holds " + std::to_string(documents.size()) +
                                      " YAML documents; a configuration is one" +
                                      yaml_location(documents[1].Mark()));
    return;
  }
  if (!documents.empty()) Reader(origin, config, errors).read_root(documents.front());
}

}  // namespace gradgate::gateway
