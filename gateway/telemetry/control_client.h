// The gateway's side of the control plane (docs/control.md): it reports to the controller
// (POST /v1/nodes, called by the telemetry's report thread) and follows its policies (a thread
// that long-polls GET /v1/policy and hands each new version to the gateway).
//
// Fail-static: when the controller cannot be reached (no answer within the request timeout,
// control.request_timeout_ms) the gateway keeps the policy it has (or its config, before any),
// says so in fail_static(), counts the request (request_failures()), and keeps trying; it
// registers again and follows new versions as soon as the controller answers. The timeout (10 s
// by default) outlasts report intervals: a slow link delays the exchanges rather than failing
// them. An answer that refuses something (a report, a policy this gateway cannot run) is logged
// and counted (errors()), but the controller is reachable: not fail-static.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/http/client.h"
#include "gateway/core/gateway.h"

namespace gradgate::gateway {

/// The shortest report interval a controller can ask for: bounds the reports a misconfigured
/// controller can draw.
inline constexpr std::chrono::milliseconds kShortestReportInterval{10};

/// What the controller refused, or sent that this gateway could not use, since the start.
struct ControlErrors {
  uint64_t unauthorized = 0;       // 401 or 403: the gateway's token is missing or wrong
  uint64_t refused = 0;            // other error answers to reports and policy requests
  uint64_t unusable_policies = 0;  // policies this gateway could not take (every attempt)
};

/// The requests to the controller that got no answer (it could not be reached, or did not answer
/// within the request timeout) since the start, by exchange; those stop() cancelled are not.
struct ControlRequestFailures {
  uint64_t reports = 0;   // POST /v1/nodes
  uint64_t policies = 0;  // GET /v1/policy
};

struct ControlClientOptions {
  /// The controller; its timeout bounds each report, and each policy request beyond poll_wait.
  http::ClientOptions server;
  uint64_t job_id = 0;
  uint32_t node = 0;
  /// How long one policy request may wait for a new version on the controller.
  std::chrono::milliseconds poll_wait{2000};
  /// Pause before asking again after a failure (or report_interval(), when shorter).
  std::chrono::milliseconds retry_delay{1000};
  /// How often this gateway reports unless the controller asks for more often.
  std::chrono::milliseconds report_interval{1000};
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

  /// Sends one report and waits for the answer (up to the server's timeout); an error when the
  /// controller did not take it. A reply's report_interval_ms (how often the controller expects
  /// reports) is kept for report_interval(). One caller at a time.
  Status report(const nlohmann::json& body);
  /// How often to report: the shorter of options' report_interval and the interval the
  /// controller's last reply asked for (it judges a node stale by its own); at least
  /// kShortestReportInterval.
  std::chrono::milliseconds report_interval() const;
  /// True while the controller cannot be reached.
  bool fail_static() const { return fail_static_.load(); }
  /// The ratio of raw to wire bytes the current policy aims at (0: none yet).
  double target_ratio() const { return target_ratio_.load(); }
  ControlErrors errors() const;
  ControlRequestFailures request_failures() const;

 private:
  void follow_policies();
  /// One policy request, updating the version the gateway knows; false when the next request
  /// should wait retry_delay (no answer, no job yet, or a refusal).
  bool poll_once(uint32_t& known_version);
  Status take_policy(const nlohmann::json& policy, uint32_t& known_version);
  /// The two exchanges with the controller, each with its own thread.
  enum Exchange { kReport = 0, kPolicy = 1 };
  /// `answer` came back to `exchange`'s request (or not: counted): fail-static follows, logged
  /// when it changes. A request that stop() cancelled says nothing of the controller.
  void note_reachable(Exchange exchange, const Status& answer);
  /// The controller answered `answer` (not 200) to `what`: counted, and logged as note_refusal.
  void note_error_answer(Exchange exchange, const http::ClientResponse& answer,
                         const std::string& what);
  /// The controller refused something or sent what this gateway cannot use: logged when the
  /// message differs from the exchange's last one.
  void note_refusal(Exchange exchange, const Status& why);
  /// Keeps the report interval a report's reply asks for (logged when it changes).
  void note_asked_interval(const http::ClientResponse& answer);

  http::RequestCancel
      cancel_;  // ends the requests in flight at stop(); before options_, which uses it
  const ControlClientOptions options_;
  Gateway& gateway_;
  std::atomic<bool> fail_static_{false};
  std::atomic<double> target_ratio_{0.0};
  /// The report interval the controller last asked for, in milliseconds; 0: none yet.
  std::atomic<int64_t> asked_interval_ms_{0};
  std::atomic<uint64_t> unauthorized_{0}, refused_{0}, unusable_policies_{0};  // errors()
  std::atomic<uint64_t> unanswered_[2]{};  // request_failures(), by Exchange
  /// Whether polls ask for this node's view of the policy (?node=); false once the controller
  /// refused the parameter (a version before it). Used by the policy thread only.
  bool ask_node_view_ = true;
  std::mutex mutex_;             // guards stopping_ and last_refusal_
  std::string last_refusal_[2];  // by Exchange
  std::condition_variable stopping_changed_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gradgate::gateway
