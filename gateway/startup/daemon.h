// The gateway daemon: a Gateway with its transport, its Unix-socket ingress and its telemetry, run
// until SIGINT or SIGTERM. What `gradgate gateway -c FILE` runs (after logging.h's
// configure_logging). Start-up in order: the workers' socket (answering "joining" meanwhile), the
// job's rank, addresses and DPDK attachment (job_joining.h), each component from its part of the
// configuration (component_options.h), then serving until a stop signal (stop_signals.h).
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

/// Runs the daemon until SIGINT or SIGTERM; an error if it cannot start.
Status run_daemon(const GatewayConfig& config, const DaemonOptions& options);

}  // namespace gradgate::gateway
