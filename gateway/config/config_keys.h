// The table of configuration keys: each key's path as written in YAML ("job.node_rank"), its
// GRADGATE_* environment name, and how its text is stored into a GatewayConfig. The YAML reader
// and the overrides both go through this table, so a key reads the same text in all three places
// and a new key is added in one place.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "gateway/config/gateway_config.h"
#include "gradgate/base/status.h"

namespace gradgate::gateway {

struct ConfigKey {
  std::string_view path;  // "section.key"
  /// A list key (job.nodes) takes several entries: `clear` empties it and `store` appends one.
  /// A scalar key takes one text, which `store` parses and assigns.
  bool is_list;
  Status (*store)(GatewayConfig& config, std::string_view text);
  void (*clear)(GatewayConfig& config);  // list keys only
};

/// Every key, section by section, in the order of docs/configuration.md.
std::span<const ConfigKey> config_keys();

/// The key named `path`, or nullptr.
const ConfigKey* find_config_key(std::string_view path);

/// Whether some key lives in `section` ("job", "ingress", ...).
bool is_config_section(std::string_view section);

/// "GRADGATE_" + the path upper-cased, '.' as '_': GRADGATE_JOB_NODE_RANK.
std::string config_env_name(std::string_view path);

}  // namespace gradgate::gateway
