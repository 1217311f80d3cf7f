// Everything a running gateway tells the outside world: its Prometheus metrics, its admin HTTP
// server (GET /livez, /readyz — ready once every peer is connected —, /metrics, /v1/status;
// docs/openapi.yaml), and, when a controller is configured, its reports to it and the policies it
// follows (control_client.h). One thread refreshes the metrics every report interval
// (ControlClient::report_interval), whatever the controller's link does. Another sends the
// reports, one at a time: each is taken one interval after the last, or as soon as a slower one
// has ended, and covers everything since the last one taken (NodeReport), so the controller
// catches up in one report. With membership from the controller (job.size) that thread also lists
// the job again while a gateway this one dials is down, so that one restarted at another address
// is dialed there.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "common/http/http_server.h"
#include "common/net/endpoint.h"
#include "gateway/core/gateway.h"
#include "gateway/core/job_shape.h"
#include "gateway/telemetry/control_client.h"
#include "gateway/telemetry/gateway_metrics.h"
#include "gateway/telemetry/membership.h"
#include "gateway/telemetry/node_report.h"
#include "gateway/transport/transport.h"

namespace gradgate::gateway {

class Telemetry {
 public:
  /// Its part of the gateway's configuration (made by gateway/startup/component_options.h).
  struct Options {
    JobShape job;
    std::string listen_host;     // where peers reach this gateway's transport (in the reports)
    std::string transport;       // job.transport's name (in /v1/status)
    net::Endpoint admin_listen;  // the admin server's address; an empty host: no admin server
    uint32_t admin_max_connections = 64;
    /// With a controller (control.url): how to report to it and follow its policies.
    std::optional<ControlClientOptions> control;
    /// With membership from the controller (job.size): how to list the job again.
    std::optional<MembershipOptions> membership;
    /// How often the metrics are refreshed while no controller says otherwise.
    std::chrono::milliseconds report_interval{1000};
  };

  /// `gateway` and `transport` must outlive it. Installs the gateway's step observer: make it
  /// before gateway.start().
  Telemetry(Options options, Gateway& gateway, Transport& transport);
  ~Telemetry();  // stop()
  Telemetry(const Telemetry&) = delete;
  Telemetry& operator=(const Telemetry&) = delete;

  /// Starts the admin server (if configured), the metrics thread, and, if a controller is
  /// configured, the report and policy threads. `transport_port` is where peers reach this
  /// gateway, for the reports.
  Status start(uint16_t transport_port);
  void stop();

  /// The admin server's port once started (0: none).
  uint16_t admin_port() const;
  /// Mirrors `ingress`'s stats in the metrics; call before start(). It must outlive stop().
  void watch_ingress(const IngressServer& ingress) { ingress_ = &ingress; }

 private:
  void refresh_loop();
  void report_loop();
  /// Waits until `until` or stop(); false once stopping.
  bool pause_until(std::chrono::steady_clock::time_point until);
  std::chrono::milliseconds report_interval() const;
  /// With membership from the controller, while a peer that this gateway dials (Transport::dials)
  /// is down and the controller answers reports: hands the transport the addresses it lists now.
  void follow_moved_peers(const std::map<uint32_t, bool>& peer_up);
  GatewaySnapshot snapshot() const;
  /// Every other gateway's rank: whether its connection is up.
  std::map<uint32_t, bool> peer_states() const;
  /// The other gateways' ranks whose connection is up (`up`) or down.
  std::vector<uint32_t> peers(bool up) const;
  nlohmann::json status_body() const;

  Options options_;  // its membership's requests end at stop() (membership_cancel_)
  Gateway& gateway_;
  Transport& transport_;
  std::shared_ptr<prometheus::Registry> registry_;
  GatewayMetrics metrics_;
  const IngressServer* ingress_ = nullptr;
  std::unique_ptr<NodeReport> report_;
  std::unique_ptr<ControlClient> control_;
  http::RequestCancel membership_cancel_;
  std::unique_ptr<http::HttpServer> admin_;
  std::mutex mutex_;
  std::condition_variable stopping_changed_;
  bool stopping_ = false;
  std::thread refresh_thread_, report_thread_;
};

}  // namespace gradgate::gateway
