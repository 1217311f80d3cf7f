// The controller's REST API (docs/control.md; docs/openapi.yaml, tag "controller"): the routes
// that gateways and operators call, added to an HttpServer. Probes and /metrics are added by the
// server assembly (control_server.h).
#pragma once

#include <boost/asio/thread_pool.hpp>

#include "common/http/http_server.h"
#include "control/policy/policy.h"
#include "control/service/controller.h"
#include "control/service/controller_metrics.h"

namespace gradgate::control {

struct RouteSettings {
  /// Sent to gateways in the reply to their reports: how often to report.
  std::chrono::milliseconds report_interval{1000};
  /// Where a PUT /v1/policy takes the members its body leaves out (the configured settings).
  PolicySettings defaults;
};

/// Adds every /v1/ route. `controller` and `metrics` must outlive the server. PUT /v1/policy and
/// /v1/budget change the settings on `settings_writer` (one thread: changes apply in the order
/// they came), where saving them to policy.settings_file may wait on the disk while the server's
/// I/O thread goes on answering reports and reads; it must outlive the server and be joined
/// before `controller` goes.
void add_control_routes(http::HttpServer& server, Controller& controller,
                        ControllerMetrics& metrics, RouteSettings settings,
                        boost::asio::thread_pool& settings_writer);

}  // namespace gradgate::control
