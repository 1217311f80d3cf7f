// The gateway daemon: a Gateway with its TCP transport and its Unix-socket ingress, run until
// SIGINT or SIGTERM. What `gradgate gateway -c FILE` runs.
#pragma once

#include <string>

#include "gateway/config/gateway_config.h"
#include "gradgate/base/status.h"

namespace gradgate::gateway {

struct DaemonOptions {
  /// When set, written once the daemon accepts peers and workers: a JSON object with the bound
  /// TCP "port", the "admin_port" of its HTTP API, the "socket" path and the "rank" (written to
  /// PATH.tmp, then renamed).
  std::string ready_file;
  /// Seconds between the summary lines in the log; 0 turns them off.
  double stats_interval_seconds = 10.0;
};

/// Sets spdlog's level and format (text or one JSON object per line) from the config.
void configure_logging(const GatewayConfig& config);

/// Runs the daemon until SIGINT or SIGTERM; an error if it cannot start.
Status run_daemon(const GatewayConfig& config, const DaemonOptions& options);

}  // namespace gradgate::gateway
