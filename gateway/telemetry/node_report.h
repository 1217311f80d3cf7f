// What a gateway tells the controller every report interval (POST /v1/nodes, docs/control.md):
// who it is, its links as measured by its transport, its workers' data volumes, its tensors, how
// fast its codecs ran, and how its steps split into compute, encode, communicate and decode
// (per-step averages over the interval since the last report).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "gateway/core/gateway.h"
#include "gateway/telemetry/gateway_metrics.h"

namespace gradgate::gateway {

/// Who a gateway is to the controller.
struct NodeIdentity {
  uint64_t job_id = 0;
  uint32_t node = 0;
  uint32_t nodes = 1;
  std::string address;  // where peers reach its transport, host:port
  std::string admin;    // its admin HTTP server, host:port ("" if none)
};

class NodeReport {
 public:
  using Clock = std::chrono::steady_clock;
  explicit NodeReport(NodeIdentity identity);

  /// The least a report holds (who the gateway is, at `step` under `policy_version`): what a
  /// gateway sends to register before it runs any step.
  static nlohmann::json registration(const NodeIdentity& identity, uint64_t step = 0,
                                     uint32_t policy_version = 0);

  /// One tensor step ended. Thread-safe.
  void observe(const StepRecord& step);
  /// The report body as of `now`; starts the next interval. Thread-safe.
  /// `now` is the state the report thread read from the gateway's parts at `at`. Take a body
  /// only to send it: its steps and per-step sums are not in the next one.
  nlohmann::json take(const Gateway& gateway, const GatewaySnapshot& now, Clock::time_point at);

 private:
  struct CodecTime {
    double raw_bytes = 0.0, encode_seconds = 0.0, decode_seconds = 0.0;
  };
  const NodeIdentity identity_;
  std::mutex mutex_;
  std::map<std::string, CodecTime> codec_times_;            // since start: speeds are averages
  double encode_ = 0.0, communicate_ = 0.0, decode_ = 0.0;  // in the interval, summed
  uint64_t step_at_last_report_ = 0;
  Clock::time_point last_report_;
};

}  // namespace gradgate::gateway
