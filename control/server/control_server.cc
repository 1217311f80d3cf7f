#include "control/server/control_server.h"

#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/http/health.h"
#include "common/http/http_server.h"
#include "common/http/token.h"
#include "common/metrics/metrics.h"
#include "control/api/routes.h"
#include "control/api/settings_file.h"
#include "control/decider/decider.h"
#include "control/service/controller.h"
#include "control/service/controller_metrics.h"

namespace gradgate::control {
namespace {

Status write_ready_file(const std::string& path, uint16_t port) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << nlohmann::json{{"port", port}}.dump() << "\n";
    if (!out.flush()) return Status(ErrorCode::kUnavailable, "cannot write " + temporary);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return Status(ErrorCode::kUnavailable, "cannot rename " + temporary + " to " + path);
  }
  return {};
}

}  // namespace

// Declared in the order they are built; destroyed the other way round, the server first (its
// handlers use the controller), then the controller (its long-poll thread uses the metrics).
struct ControlServer::Parts {
  std::shared_ptr<prometheus::Registry> registry;
  ControllerMetrics metrics;
  Controller controller;
  // Declared between the two: the server (its handlers post here) goes first, then this joins,
  // then the controller that its changes use.
  boost::asio::thread_pool settings_writer{1};
  http::HttpServer server;

  Parts(const ControlConfig& config, Decider decider, std::string token)
      : registry(metrics::make_registry("controller")),
        metrics(*registry),
        controller(std::move(decider), config.stale_after, metrics,
                   std::min(config.report_interval, config.stale_after), config.forget_after,
                   config.max_jobs),
        server(http::ServerOptions{.bind_address = config.listen_host,
                                   .port = config.listen_port,
                                   .max_body_bytes = config.max_body_bytes,
                                   .request_timeout = config.request_timeout,
                                   .max_connections = config.max_connections,
                                   .token = http::TokenCheck(std::move(token)),
                                   .on_response = metrics::count_responses(
                                       registry, "gradgate_controller_http_requests_total")}) {}
};

Result<std::unique_ptr<ControlServer>> ControlServer::make(const ControlConfig& config) {
  auto token = http::load_optional_token(config.token_file, config.token_env);
  if (!token.ok()) return token.status();
  if (token->empty()) {
    spdlog::warn(
        "no bearer token (auth.token_file and ${} are empty): every client may report and change "
        "the policy; use this only on a loopback address",
        config.token_env);
  }
  auto stored = stored_settings(config);
  if (!stored.ok()) return stored.status();
  if (*stored) {
    spdlog::info("policy settings from {} (set through the API), not the config's: policy {}",
                 config.settings_file, (*stored)->name);
  }
  auto decider = Decider::make(stored->value_or(config.policy),
                               VersionSchedule{.lead_seconds = config.lead_seconds,
                                               .min_lead_steps = config.min_lead_steps,
                                               .min_interval = config.min_interval});
  if (!decider.ok()) return decider.status();
  auto parts = std::make_unique<Parts>(config, *std::move(decider), *std::move(token));
  if (!config.settings_file.empty()) {
    parts->controller.save_settings_with([path = config.settings_file](const PolicySettings& s) {
      return save_settings_file(path, s);
    });
  }
  http::serve_health(parts->server, {});
  metrics::serve_metrics(parts->server, parts->registry);
  add_control_routes(
      parts->server, parts->controller, parts->metrics,
      RouteSettings{.report_interval = config.report_interval, .defaults = config.policy},
      parts->settings_writer);
  return std::unique_ptr<ControlServer>(new ControlServer(std::move(parts)));
}

ControlServer::ControlServer(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

ControlServer::~ControlServer() { stop(); }

Status ControlServer::start() { return parts_->server.start(); }

void ControlServer::stop() { parts_->server.stop(); }

uint16_t ControlServer::port() const { return parts_->server.port(); }

void configure_logging(const ControlConfig& config) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("gradgate-control"));
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  if (config.log_format == "json") {
    spdlog::set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","component":"controller","msg":"%v"})",
        spdlog::pattern_time_type::utc);
  } else {
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [controller] %v");
  }
}

Status run_controller(const ControlConfig& config, const std::string& ready_file) {
  // Block the stop signals before any thread starts, so that only sigwait receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigset_t blocked = stop_signals;
  sigaddset(&blocked, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &blocked, nullptr);

  auto server = ControlServer::make(config);
  if (!server.ok()) return server.status();
  GRADGATE_RETURN_IF_ERROR((*server)->start());
  spdlog::info("controller listening on {}:{}, policy {}", config.listen_host, (*server)->port(),
               config.policy.name);
  if (!ready_file.empty())
    GRADGATE_RETURN_IF_ERROR(write_ready_file(ready_file, (*server)->port()));
  int received = 0;
  sigwait(&stop_signals, &received);
  spdlog::info("controller stopping on signal {}", received);
  (*server)->stop();
  return {};
}

}  // namespace gradgate::control
