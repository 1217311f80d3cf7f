// The table of the controller's configuration keys: each key's path ("nodes.stale_after_ms") and
// how its YAML value is stored into a ControlConfig. The file reader and the overrides both go
// through it, so a key reads the same value wherever it is written.
#pragma once

#include <yaml-cpp/yaml.h>

#include <span>

#include "common/config/key_table.h"
#include "control/config/control_config.h"
#include "gradgate/base/status.h"

namespace gradgate::control {

/// A key of the controller's configuration: `store` parses the whole YAML value (a list key takes
/// its list at once).
using ControlKey = config::Key<ControlConfig, const YAML::Node&>;

/// Every key, section by section, in the order of config/control.yaml.
std::span<const ControlKey> control_keys();

}  // namespace gradgate::control
