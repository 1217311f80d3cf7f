#include "common/config/yaml_sections.h"

#include <map>
#include <vector>

#include "common/config/config_source.h"

namespace gradgate::config {
namespace {

class Walk {
 public:
  Walk(std::string_view origin, const SectionReader& reader, ConfigErrors& errors)
      : origin_(origin), reader_(reader), errors_(errors) {}

  void read_root(const YAML::Node& root) {
    if (root.IsNull()) return;
    if (!root.IsMap()) {
      std::string sections;
      for (const std::string_view section : reader_.sections) {
        sections += (sections.empty() ? "" : ", ") + std::string(section);
      }
      errors_.add_unreadable(origin_, "the top level must be a mapping of sections (" + sections +
                                          "), not " + shape_name(root) +
                                          yaml_location(root.Mark()));
      return;
    }
    for (const auto& entry : root) {
      const std::string section = entry.first.Scalar();
      if (!entry.first.IsScalar()) {
        errors_.add_general(origin_, "a section name must be a plain name, not " +
                                         shape_name(entry.first) +
                                         yaml_location(entry.first.Mark()));
      } else if (!is_section(section)) {
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
  bool is_section(std::string_view name) const {
    for (const std::string_view section : reader_.sections) {
      if (section == name) return true;
    }
    return false;
  }

  void read_section(const std::string& section, const YAML::Node& keys) {
    for (const auto& entry : keys) {
      const std::string path = section + "." + entry.first.Scalar();
      if (!entry.first.IsScalar()) {
        error(section, "a key must be a plain name, not " + shape_name(entry.first), entry.first);
        continue;
      }
      const void* key = reader_.find(path);
      if (key == nullptr) {
        error(path, "unknown key", entry.first);
      } else if (first_occurrence(path, entry.first)) {
        reader_.read_value(key, entry.second);
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

  void error(const std::string& path, const std::string& message, const YAML::Node& where) {
    errors_.add(origin_, path, message + yaml_location(where.Mark()));
  }

  std::string_view origin_;
  const SectionReader& reader_;
  ConfigErrors& errors_;
  std::map<std::string, YAML::Mark> seen_;
};

}  // namespace

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

void read_yaml_sections(const std::string& text, std::string_view origin,
                        const SectionReader& reader, ConfigErrors& errors) {
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
  if (!documents.empty()) Walk(origin, reader, errors).read_root(documents.front());
}

}  // namespace gradgate::config
