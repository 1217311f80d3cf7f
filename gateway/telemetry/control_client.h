// The gateway's side of the control plane (docs/control.md): it reports to the controller
// (POST /v1/nodes, called by the telemetry loop) and follows its policies (a thread that
// long-polls GET /v1/policy and hands each new version to the gateway).
//
// Fail-static: when the controller cannot be reached the gateway keeps the policy it has (or its
// config, before any), says so in fail_static(), and keeps trying; it registers again and follows
// new versions as soon as the controller answers. An answer that refuses something (a report, a
// policy this gateway cannot run) is logged, but the controller is reachable: not fail-static.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/http/client.h"
#include "gateway/config/gateway_config.h"
#include "gateway/core/gateway.h"

namespace gradgate::gateway {

/// How to reach the controller of `config`: control.url, the bearer token of
/// control.token_file or control.token_env, control.report_interval_ms per request.
Result<http::ClientOptions> controller_options(const GatewayConfig& config);

struct ControlClientOptions {
  http::ClientOptions server;  // the controller; its timeout bounds each report
  uint64_t job_id = 0;
  uint32_t node = 0;
  /// How long one policy request may wait for a new version on the controller.
  std::chrono::milliseconds poll_wait{2000};
  /// Pause before asking again after a failure.
  std::chrono::milliseconds retry_delay{1000};
};

class ControlClient {
 public:
  ControlClient(ControlClientOptions options, Gateway& gateway);
  ~ControlClient();  // stop()
  ControlClient(const ControlClient&) = delete;
  ControlClient& operator=(const ControlClient&) = delete;

  /// Starts following the controller's policies.
  void start();
  /// Ends the policy thread at once, cancelling its poll, and every report from now on (they
  /// return kAborted). Idempotent.
  void stop();

  /// Sends one report; an error when the controller did not take it.
  Status report(const nlohmann::json& body);
  /// True while the controller cannot be reached.
  bool fail_static() const { return fail_static_.load(); }
  /// The ratio of raw to wire bytes the current policy aims at (0: none yet).
  double target_ratio() const { return target_ratio_.load(); }

 private:
  void follow_policies();
  /// One policy request, updating the version the gateway knows; false when the next request
  /// should wait retry_delay (no answer, no job yet, or a refusal).
  bool poll_once(uint32_t& known_version);
  Status take_policy(const nlohmann::json& policy, uint32_t& known_version);
  /// `answer` came back (or not): fail-static follows, logged when it changes. A request that
  /// stop() cancelled says nothing of the controller.
  void note_reachable(const Status& answer);
  /// The controller refused something or sent what this gateway cannot use: logged once per
  /// distinct message.
  void note_refusal(const Status& why);

  http::RequestCancel
      cancel_;  // ends the requests in flight at stop(); before options_, which uses it
  const ControlClientOptions options_;
  Gateway& gateway_;
  std::atomic<bool> fail_static_{false};
  std::atomic<double> target_ratio_{0.0};
  /// Whether polls ask for this node's view of the policy (?node=); false once the controller
  /// refused the parameter (a version before it). Used by the policy thread only.
  bool ask_node_view_ = true;
  std::mutex mutex_;  // guards stopping_ and last_refusal_
  std::string last_refusal_;
  std::condition_variable stopping_changed_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gradgate::gateway
