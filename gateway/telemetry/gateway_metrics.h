// The gateway's Prometheus metrics (docs/metrics.md lists each): what every step moved and how
// long it took, as the steps end (observe), and the gauges and counters that mirror the core's,
// the transport's and the mailbox's own counts (refresh, called by the telemetry thread every
// control.report_interval_ms: a scrape sees them at most that old). Labels are bounded: codec name,
// peer rank, error kind, control exchange — never a tensor name or a step. (The admin API's
// response counter, by route pattern and status, is registered with the server:
// metrics::count_responses.)
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gateway/collective/mailbox.h"
#include "gateway/core/gateway.h"
#include "gateway/ingress/ingress.h"
#include "gateway/telemetry/control_client.h"
#include "gateway/transport/transport.h"

namespace gradgate::gateway {

/// What the metrics mirror, read from the gateway's parts at one moment.
struct GatewaySnapshot {
  GatewayStats core;
  TransportStats transport;
  MailboxStats mailbox;
  IngressStats ingress;
  std::vector<LinkEstimate> links;
  std::map<uint32_t, bool> peer_up;  // every other gateway of the job by rank: connected now
  std::vector<PlacementRecord> placement_probes;
  bool fail_static = false;
  double target_ratio = 0.0;  // from the controller's policy; 0: none
  ControlErrors control_errors;
  ControlRequestFailures control_request_failures;
};

class GatewayMetrics {
 public:
  explicit GatewayMetrics(std::shared_ptr<prometheus::Registry> registry);

  /// One tensor step ended. Thread-safe.
  void observe(const StepRecord& step);
  /// Brings the mirrored gauges and counters up to `now`. Thread-safe.
  void refresh(const GatewaySnapshot& now);

 private:
  struct PerCodec {
    prometheus::Counter* raw_bytes;
    prometheus::Counter* wire_bytes;
    prometheus::Counter* steps;
    prometheus::Histogram* encode;
    prometheus::Histogram* communicate;
    prometheus::Histogram* decode;
  };
  PerCodec& codec_locked(std::string_view codec, std::string_view device);
  /// Adds what `total` grew by since the last refresh to `counter`.
  static void advance(prometheus::Counter& counter, uint64_t total, uint64_t& last);

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& raw_bytes_;
  prometheus::Family<prometheus::Counter>& wire_bytes_;
  prometheus::Family<prometheus::Counter>& steps_;
  prometheus::Family<prometheus::Counter>& errors_;
  prometheus::Family<prometheus::Counter>& control_errors_;
  prometheus::Family<prometheus::Counter>& control_request_failures_;
  prometheus::Family<prometheus::Histogram>& encode_seconds_;
  prometheus::Histogram& local_wait_seconds_;
  prometheus::Family<prometheus::Histogram>& communicate_seconds_;
  prometheus::Family<prometheus::Histogram>& decode_seconds_;
  prometheus::Counter& union_elements_;
  prometheus::Gauge& ratio_;
  prometheus::Gauge& target_ratio_;
  prometheus::Family<prometheus::Gauge>& link_bandwidth_;
  prometheus::Family<prometheus::Gauge>& link_rtt_;
  prometheus::Family<prometheus::Gauge>& peer_up_;
  prometheus::Gauge& residual_bytes_;
  prometheus::Gauge& policy_version_;
  prometheus::Gauge& policy_version_received_;
  prometheus::Gauge& peers_up_;
  prometheus::Gauge& fail_static_;
  prometheus::Gauge& workers_;
  prometheus::Gauge& tensors_;
  prometheus::Gauge& tensors_off_policy_;
  prometheus::Family<prometheus::Gauge>& gpu_tensors_;
  prometheus::Gauge& gpu_tensors_on_gpu_;
  prometheus::Gauge& gpu_tensors_on_cpu_;
  prometheus::Family<prometheus::Gauge>& placement_probe_rate_;
  prometheus::Counter& transport_bytes_sent_;
  prometheus::Counter& transport_bytes_received_;
  prometheus::Counter& probes_sent_;
  prometheus::Counter& transport_messages_sent_;
  prometheus::Counter& transport_messages_received_;
  prometheus::Counter& retransmits_;
  prometheus::Counter& reconnects_;
  prometheus::Counter& resent_bytes_;
  prometheus::Family<prometheus::Counter>& peers_down_;
  prometheus::Counter& poll_cpu_seconds_;
  prometheus::Gauge& ingress_cuda_mappings_;

  std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, PerCodec> codecs_;  // by (codec, device)
  // Totals at the last refresh, for counters mirrored from cumulative counts.
  uint64_t last_bytes_sent_ = 0, last_bytes_received_ = 0, last_probes_ = 0, last_retransmits_ = 0;
  uint64_t last_messages_sent_ = 0, last_messages_received_ = 0;
  uint64_t last_reconnects_ = 0, last_resent_bytes_ = 0;
  std::array<uint64_t, kPeerDownReasons> last_peers_down_{};
  double last_poll_cpu_seconds_ = 0.0;
  uint64_t last_rejected_ = 0, last_foreign_ = 0, last_refused_ = 0;
  uint64_t last_protocol_errors_ = 0, last_connections_refused_ = 0, last_workers_refused_ = 0,
           last_declarations_refused_ = 0;
  ControlErrors last_control_errors_;
  ControlRequestFailures last_control_request_failures_;
  // Raw and wire bytes at the last refresh: the achieved ratio is over the interval since.
  uint64_t last_raw_ = 0, last_wire_ = 0;
};

}  // namespace gradgate::gateway
