#include "gateway/config/yaml_reader.h"

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <string>

#include "common/config/config_source.h"
#include "common/config/yaml_sections.h"
#include "gateway/config/config_keys.h"

namespace gradgate::gateway {
namespace {

using config::shape_name;
using config::yaml_location;

// Stores one known key's value: a scalar's text, or a list's entries one by one.
class Store {
 public:
  Store(std::string_view origin, GatewayConfig& config, config::ConfigErrors& errors)
      : origin_(origin), config_(config), errors_(errors) {}

  void operator()(const ConfigKey& key, const YAML::Node& value) {
    if (key.is_list) {
      read_list(key, value);
    } else if (value.IsScalar()) {
      store(key, std::string(key.path), value);
    } else {
      error(std::string(key.path), "must be a single value, not " + shape_name(value), value);
    }
  }

 private:
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

  void store(const ConfigKey& key, const std::string& path, const YAML::Node& value) {
    const Status status = key.store(config_, value.Scalar());
    if (!status.ok()) error(path, status.message(), value);
  }

  void error(const std::string& path, const std::string& message, const YAML::Node& where) {
    errors_.add(origin_, path, message + yaml_location(where.Mark()));
  }

  std::string_view origin_;
  GatewayConfig& config_;
  config::ConfigErrors& errors_;
};

}  // namespace

void read_yaml_config(const std::string& text, std::string_view origin, GatewayConfig& config,
                      config::ConfigErrors& errors) {
  config::read_yaml_sections(text, origin, config_keys(), Store(origin, config, errors), errors);
}

}  // namespace gradgate::gateway
