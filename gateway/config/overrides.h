// Overrides of configuration keys from outside the file, applied in this order after it:
//   1. environment variables GRADGATE_<SECTION>_<KEY> (GRADGATE_JOB_NODE_RANK=1);
//   2. --set texts "section.key=value" (job.node_rank=1), in the order given; the last one wins.
// Values have the text form of the YAML scalars; a list key (job.nodes) takes a comma-separated
// list. A GRADGATE_ variable of a known section that names no key is an error (a typo must not
// be ignored); other GRADGATE_ variables (GRADGATE_LIBRARY, ...) are not configuration and are
// left alone.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/config/config_errors.h"
#include "gateway/config/gateway_config.h"

namespace gradgate::gateway {

void apply_env_overrides(const std::map<std::string, std::string>& env, GatewayConfig& config,
                         config::ConfigErrors& errors);

void apply_set_overrides(const std::vector<std::string>& overrides, GatewayConfig& config,
                         config::ConfigErrors& errors);

}  // namespace gradgate::gateway
