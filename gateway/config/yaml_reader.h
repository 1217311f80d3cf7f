// Reads the YAML form of the configuration (sections of keys, see docs/configuration.md) into a
// GatewayConfig. Keys absent from the text keep the value they had. Syntax errors, unknown
// sections and keys, values of the wrong shape and unreadable values are all recorded, each with
// its key path and line, and reading goes on past them.
#pragma once

#include <string>
#include <string_view>

#include "common/config/config_errors.h"
#include "gateway/config/gateway_config.h"

namespace gradgate::gateway {

void read_yaml_config(const std::string& text, std::string_view origin, GatewayConfig& config,
                      config::ConfigErrors& errors);

}  // namespace gradgate::gateway
