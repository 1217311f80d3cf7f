#include "gateway/telemetry/telemetry.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/http/health.h"
#include "common/metrics/metrics.h"
#include "gradgate/config.h"

namespace gradgate::gateway {

Telemetry::Telemetry(Options options, Gateway& gateway, Transport& transport)
    : options_(std::move(options)),
      gateway_(gateway),
      transport_(transport),
      registry_(metrics::make_registry("gateway")),
      metrics_(registry_) {
  if (options_.membership) options_.membership->controller.cancel = &membership_cancel_;
  gateway_.set_step_observer([this](const StepRecord& step) {
    metrics_.observe(step);
    if (report_) report_->observe(step);
  });
}

Telemetry::~Telemetry() { stop(); }

Status Telemetry::start(uint16_t transport_port) {
  if (!options_.admin_listen.host.empty()) {
    http::ServerOptions options;
    options.bind_address = options_.admin_listen.host;
    options.port = options_.admin_listen.port;
    options.max_connections = options_.admin_max_connections;
    options.on_response = metrics::count_responses(registry_, "gradgate_http_requests_total");
    admin_ = std::make_unique<http::HttpServer>(options);
    // Ready once every other gateway of the job is connected: before that no all-reduce can run.
    http::serve_health(*admin_, [this]() -> Status {
      const auto down = peers(false);
      if (down.empty()) return {};
      std::string missing;
      for (const uint32_t rank : down)
        missing += (missing.empty() ? "" : ", ") + std::to_string(rank);
      return Status(ErrorCode::kUnavailable, "waiting for gateways " + missing);
    });
    metrics::serve_metrics(*admin_, registry_);
    admin_->add_route(http::verb::get, "/v1/status",
                      [this](const http::Request&) { return http::json_response(status_body()); },
                      {.query = {{}}});
    Status started = admin_->start();
    if (!started.ok()) {
      return Status(started.code(), "admin.listen: " + started.message());
    }
    spdlog::info("admin API on {}:{}", options_.admin_listen.host, admin_->port());
  }
  if (options_.control) {
    NodeIdentity identity{
        options_.job.id, options_.job.node_rank, options_.job.nodes,
        options_.listen_host + ":" + std::to_string(transport_port),
        admin_ ? options_.admin_listen.host + ":" + std::to_string(admin_->port()) : ""};
    report_ = std::make_unique<NodeReport>(std::move(identity));
    control_ = std::make_unique<ControlClient>(*options_.control, gateway_);
    control_->start();
    report_thread_ = std::thread([this] { report_loop(); });
  }
  refresh_thread_ = std::thread([this] { refresh_loop(); });
  return {};
}

void Telemetry::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  stopping_changed_.notify_all();
  // First: they cancel a report or a membership request the report thread may be waiting on.
  if (control_) control_->stop();
  membership_cancel_.cancel();
  if (report_thread_.joinable()) report_thread_.join();
  if (refresh_thread_.joinable()) refresh_thread_.join();
  if (admin_) admin_->stop();
}

uint16_t Telemetry::admin_port() const { return admin_ ? admin_->port() : 0; }

bool Telemetry::pause_until(std::chrono::steady_clock::time_point until) {
  std::unique_lock lock(mutex_);
  return !stopping_changed_.wait_until(lock, until, [this] { return stopping_; });
}

std::chrono::milliseconds Telemetry::report_interval() const {
  return control_ ? control_->report_interval() : options_.report_interval;
}

void Telemetry::refresh_loop() {
  do {
    metrics_.refresh(snapshot());
  } while (pause_until(std::chrono::steady_clock::now() + report_interval()));
}

void Telemetry::report_loop() {
  // One report at a time: the next is taken once the last has its answer (or none), so a report
  // slower than an interval is followed at once by one that covers everything since it was taken.
  NodeReport::Clock::time_point taken;
  do {
    const GatewaySnapshot now = snapshot();
    taken = NodeReport::Clock::now();
    (void)control_->report(report_->take(gateway_, now, taken));
    follow_moved_peers(now.peer_up);
  } while (pause_until(taken + report_interval()));
}

void Telemetry::follow_moved_peers(const std::map<uint32_t, bool>& peer_up) {
  if (!options_.membership || control_->fail_static()) return;
  if (std::none_of(peer_up.begin(), peer_up.end(), [this](const auto& peer) {
        return !peer.second && transport_.dials(peer.first);
      })) {
    return;
  }
  auto members = live_members_through_controller(*options_.membership);
  if (members.ok()) transport_.update_peers(*members);
}

std::map<uint32_t, bool> Telemetry::peer_states() const {
  std::map<uint32_t, bool> states;
  for (uint32_t rank = 0; rank < options_.job.nodes; ++rank) {
    if (rank != options_.job.node_rank) states[rank] = transport_.peer_up(rank);
  }
  return states;
}

std::vector<uint32_t> Telemetry::peers(bool up) const {
  std::vector<uint32_t> ranks;
  for (const auto& [rank, connected] : peer_states()) {
    if (connected == up) ranks.push_back(rank);
  }
  return ranks;
}

GatewaySnapshot Telemetry::snapshot() const {
  GatewaySnapshot now;
  now.core = gateway_.stats();
  now.transport = transport_.stats();
  now.mailbox = gateway_.mailbox_stats();
  if (ingress_ != nullptr) now.ingress = ingress_->stats();
  now.links = transport_.links();
  now.peer_up = peer_states();
  now.placement_probes = gateway_.placement_probes();
  now.fail_static = control_ && control_->fail_static();
  now.target_ratio = control_ ? control_->target_ratio() : 0.0;
  if (control_) {
    now.control_errors = control_->errors();
    now.control_request_failures = control_->request_failures();
  }
  return now;
}

nlohmann::json Telemetry::status_body() const {
  const GatewayStats stats = gateway_.stats();
  const std::string controller =
      options_.control
          ? net::Endpoint{options_.control->server.host, options_.control->server.port}.to_string()
          : "";
  return {{"job_id", options_.job.id},
          {"node", options_.job.node_rank},
          {"nodes", options_.job.nodes},
          {"transport", options_.transport},
          {"transports", GRADGATE_TRANSPORTS},
          {"peers_up", peers(true)},
          {"policy_version", stats.applied_policy_version},
          {"fail_static", control_ && control_->fail_static()},
          {"controller", controller},
          {"tensors", stats.tensors},
          {"allreduces", stats.allreduces},
          {"allreduce_errors", stats.allreduce_errors},
          {"raw_bytes", stats.raw_bytes},
          {"wire_bytes", stats.wire_bytes}};
}

}  // namespace gradgate::gateway
