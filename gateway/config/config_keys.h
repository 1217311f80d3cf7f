// The table of the gateway's configuration keys: each key's path as written in YAML
// ("job.node_rank", and so its GRADGATE_* environment name) and how its text is stored into a
// GatewayConfig. The YAML reader and the overrides both go through this table, so a key reads the
// same text in all three places and a new key is added in one place.
#pragma once

#include <span>
#include <string_view>

#include "common/config/key_table.h"
#include "gateway/config/gateway_config.h"
#include "gradgate/base/status.h"

namespace gradgate::gateway {

/// A key of the gateway's configuration: `store` parses the text of one YAML scalar (a list key,
/// job.nodes, takes its entries one by one after `clear`).
using ConfigKey = config::Key<GatewayConfig, std::string_view>;

/// Every key, section by section, in the order of docs/configuration.md.
std::span<const ConfigKey> config_keys();

}  // namespace gradgate::gateway
