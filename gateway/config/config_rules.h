// The rules a configuration must follow beyond the form of each value: ranges, relations between
// keys, codec specs. validate_gateway_config formats these issues; the loader also uses `inputs`
// to leave out rules that read a key which could not be read (their verdict would be noise).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gateway/config/gateway_config.h"

namespace gradgate::gateway {

struct ConfigIssue {
  std::string key_path;                  // "job.nodes[0]"
  std::string message;                   // "needs a port in 1..65535: ..."
  std::vector<std::string_view> inputs;  // every key ("section.key") the rule read
};

std::vector<ConfigIssue> check_gateway_config(const GatewayConfig& config);

}  // namespace gradgate::gateway
