// The table of the controller's configuration keys: each key's path ("nodes.stale_after_ms") and
// how its YAML value is stored into a ControlConfig. The file reader and the overrides both go
// through it, so a key reads the same value wherever it is written.
#pragma once

#include <yaml-cpp/yaml.h>

#include <span>
#include <string_view>

#include "control/config/control_config.h"
#include "gradgate/base/status.h"

namespace gradgate::control {

struct ControlKey {
  std::string_view path;  // "section.key"
  /// Whether the value is a YAML list (an override then reads its text as YAML flow text).
  bool is_list;
  /// Parses `value` and assigns it; kInvalidArgument says what was expected.
  Status (*store)(ControlConfig& config, const YAML::Node& value);
};

/// Every key, section by section, in the order of config/control.yaml.
std::span<const ControlKey> control_keys();

/// The key named `path`, or nullptr.
const ControlKey* find_control_key(std::string_view path);

/// Whether some key lives in `section` ("server", "policy", ...).
bool is_control_section(std::string_view section);

}  // namespace gradgate::control
