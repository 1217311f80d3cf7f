// load_gateway_config and parse_gateway_config: file, then environment, then --set, then the
// default of transport.listen, then the rules; every problem of every stage in one Status.
#include <algorithm>

#include "common/config/config_errors.h"
#include "common/config/config_source.h"
#include "gateway/config/config_rules.h"
#include "gateway/config/gateway_config.h"
#include "gateway/config/overrides.h"
#include "gateway/config/yaml_reader.h"

namespace gradgate::gateway {
namespace {

bool reads_failed_key(const ConfigIssue& issue, const config::ConfigErrors& errors) {
  return std::any_of(issue.inputs.begin(), issue.inputs.end(),
                     [&](std::string_view key) { return errors.failed(key); });
}

}  // namespace

Result<GatewayConfig> parse_gateway_config(const std::string& yaml, const std::string& origin,
                                           const std::map<std::string, std::string>& env,
                                           const std::vector<std::string>& overrides) {
  GatewayConfig config;
  config::ConfigErrors errors;
  read_yaml_config(yaml, origin, config, errors);
  apply_env_overrides(env, config, errors);
  apply_set_overrides(overrides, config, errors);
  if (config.listen.host.empty() && config.node_rank < config.nodes.size()) {
    config.listen = config.nodes[config.node_rank];
  }
  for (const auto& issue : check_gateway_config(config)) {
    if (reads_failed_key(issue, errors)) continue;
    errors.add(origin, issue.key_path, issue.message);
  }
  if (!errors.empty()) return Status(ErrorCode::kInvalidArgument, errors.joined());
  return config;
}

Result<GatewayConfig> load_gateway_config(const std::string& path,
                                          const std::vector<std::string>& overrides) {
  auto text = config::read_config_file(path);
  if (!text.ok()) return text.status();
  return parse_gateway_config(*text, path, config::process_environment(), overrides);
}

}  // namespace gradgate::gateway
