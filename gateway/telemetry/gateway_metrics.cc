#include "gateway/telemetry/gateway_metrics.h"

#include <string>

namespace gradgate::gateway {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

// 100 µs to ~52 s in factors of 2: a small tensor's encode to a slow link's step.
prometheus::Histogram::BucketBoundaries seconds_buckets() {
  prometheus::Histogram::BucketBoundaries bounds;
  for (double b = 1e-4; b < 60.0; b *= 2.0) bounds.push_back(b);
  return bounds;
}

// A metric's name and help text (docs/metrics.md lists each), in the order of registration.
struct MetricText {
  const char* name;
  const char* help;
};

constexpr MetricText kRawBytes{
    "gradgate_raw_bytes_total",
    "Bytes of the node sums all-reduced, in their dtype (what DDP would send), by codec"};
constexpr MetricText kWireBytes{
    "gradgate_wire_bytes_total",
    "Bytes this gateway sent to other gateways for its all-reduces, by codec"};
constexpr MetricText kSteps{"gradgate_allreduces_total", "Tensor all-reduces completed, by codec"};
constexpr MetricText kErrors{
    "gradgate_errors_total",
    "Errors by kind: failed all-reduces by error code, rejected and foreign transport messages, "
    "messages the mailbox refused, malformed messages from workers, worker connections refused for "
    "lack of file descriptors, workers refused at connect, declarations refused"};
constexpr MetricText kControlErrors{
    "gradgate_control_errors_total",
    "The controller's refusals by kind: unauthorized (401, 403: the token), refused (other error "
    "answers), unusable_policy (policies this gateway could not take)"};
constexpr MetricText kControlRequestFailures{
    "gradgate_control_request_failures_total",
    "Requests to the controller that got no answer (unreachable, or past "
    "control.request_timeout_ms), by exchange: report, policy"};
constexpr MetricText kEncodeSeconds{
    "gradgate_encode_seconds",
    "Encode time of one tensor all-reduce on this gateway, by codec and device (cpu, gpu)"};
constexpr MetricText kLocalWaitSeconds{"gradgate_local_wait_seconds",
                                       "From the first local worker's all-reduce request of a step "
                                       "to the last's: how long the node's stragglers lag"};
constexpr MetricText kCommunicateSeconds{
    "gradgate_communicate_seconds",
    "Time one tensor all-reduce spent sending and waiting, by codec"};
constexpr MetricText kDecodeSeconds{
    "gradgate_decode_seconds",
    "Decode and add time of one tensor all-reduce, by codec and device (cpu, gpu)"};
constexpr MetricText kUnionElements{"gradgate_aggregator_union_elements_total",
                                    "Aggregator mode: nonzero elements of the sums this gateway "
                                    "aggregated (the union of the workers' indices)"};
constexpr MetricText kRatio{"gradgate_compression_ratio",
                            "Raw bytes over wire bytes of the all-reduces since the last refresh"};
constexpr MetricText kTargetRatio{
    "gradgate_target_ratio", "Raw over wire bytes the controller's policy aims at (0: no policy)"};
constexpr MetricText kLinkBandwidth{"gradgate_link_bandwidth_bytes_per_second",
                                    "Goodput estimate of the link from each peer to this gateway"};
constexpr MetricText kLinkRtt{"gradgate_link_rtt_seconds",
                              "Smoothed round-trip time of the connection to each peer"};
constexpr MetricText kPeerUp{"gradgate_peer_up",
                             "1 while the connection to the peer is up, 0 while it is down"};
constexpr MetricText kResidualBytes{"gradgate_residual_memory_bytes",
                                    "Memory held by error-feedback residuals and node sums"};
constexpr MetricText kPolicyVersion{"gradgate_policy_version",
                                    "Newest policy version a step has run under (0: the config)"};
constexpr MetricText kPolicyVersionReceived{"gradgate_policy_version_received",
                                            "Newest policy version received from the controller"};
constexpr MetricText kPeersUp{"gradgate_peers_up", "Other gateways of the job connected now"};
constexpr MetricText kFailStatic{"gradgate_fail_static",
                                 "1 while the controller is unreachable and the last policy stays"};
constexpr MetricText kWorkers{"gradgate_local_workers", "Local workers connected"};
constexpr MetricText kTensors{"gradgate_tensors", "Tensors declared"};
constexpr MetricText kTensorsOffPolicy{
    "gradgate_tensors_off_policy",
    "Tensors that keep a codec other than their policy's, which compression.collective cannot run"};
constexpr MetricText kGpuTensors{"gradgate_gpu_tensors",
                                 "Tensors whose buffers are GPU memory, by where their codec runs "
                                 "(gpu; cpu: the node sum staged through host memory)"};
constexpr MetricText kPlacementProbeRate{
    "gradgate_placement_probe_elements_per_second",
    "One step of a codec (encode, frame staging, decode) as the placement probe measured it, by "
    "codec and device (gpu, cpu)"};
constexpr MetricText kTransportBytesSent{
    "gradgate_transport_sent_bytes_total",
    "Bytes written to other gateways, framing and probes included"};
constexpr MetricText kTransportBytesReceived{
    "gradgate_transport_received_bytes_total",
    "Bytes read from other gateways, framing and probes included"};
constexpr MetricText kProbesSent{"gradgate_link_probes_total", "Probes sent to measure idle links"};
constexpr MetricText kTransportMessagesSent{
    "gradgate_transport_messages_sent_total",
    "Messages delivered to other gateways (acknowledged, where the transport acknowledges)"};
constexpr MetricText kTransportMessagesReceived{"gradgate_transport_messages_received_total",
                                                "Whole messages received from other gateways"};
constexpr MetricText kRetransmits{
    "gradgate_transport_retransmits_total",
    "Datagrams sent again after a timeout or a loss (DPDK transport)"};
constexpr MetricText kReconnects{
    "gradgate_transport_reconnects_total",
    "Connections that carried a live session on after one broke (TCP)"};
constexpr MetricText kResentBytes{"gradgate_transport_resent_bytes_total",
                                  "Bytes of messages written again after a reconnection (TCP)"};
constexpr MetricText kPeersDown{"gradgate_peers_down_total",
                                "Other gateways of the job reported down, by reason"};
constexpr MetricText kPollCpuSeconds{"gradgate_transport_poll_cpu_seconds_total",
                                     "CPU time of the thread that polls the DPDK port"};
constexpr MetricText kIngressCudaMappings{"gradgate_ingress_cuda_mappings",
                                          "Workers' GPU allocations open through CUDA IPC now"};

prometheus::Family<prometheus::Counter>& counters(prometheus::Registry& registry,
                                                  const MetricText& text) {
  return BuildCounter().Name(text.name).Help(text.help).Register(registry);
}

prometheus::Family<prometheus::Gauge>& gauges(prometheus::Registry& registry,
                                              const MetricText& text) {
  return BuildGauge().Name(text.name).Help(text.help).Register(registry);
}

prometheus::Family<prometheus::Histogram>& histograms(prometheus::Registry& registry,
                                                      const MetricText& text) {
  return BuildHistogram().Name(text.name).Help(text.help).Register(registry);
}

}  // namespace

GatewayMetrics::GatewayMetrics(std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)),
      raw_bytes_(counters(*registry_, kRawBytes)),
      wire_bytes_(counters(*registry_, kWireBytes)),
      steps_(counters(*registry_, kSteps)),
      errors_(counters(*registry_, kErrors)),
      control_errors_(counters(*registry_, kControlErrors)),
      control_request_failures_(counters(*registry_, kControlRequestFailures)),
      encode_seconds_(histograms(*registry_, kEncodeSeconds)),
      local_wait_seconds_(histograms(*registry_, kLocalWaitSeconds).Add({}, seconds_buckets())),
      communicate_seconds_(histograms(*registry_, kCommunicateSeconds)),
      decode_seconds_(histograms(*registry_, kDecodeSeconds)),
      union_elements_(counters(*registry_, kUnionElements).Add({})),
      ratio_(gauges(*registry_, kRatio).Add({})),
      target_ratio_(gauges(*registry_, kTargetRatio).Add({})),
      link_bandwidth_(gauges(*registry_, kLinkBandwidth)),
      link_rtt_(gauges(*registry_, kLinkRtt)),
      peer_up_(gauges(*registry_, kPeerUp)),
      residual_bytes_(gauges(*registry_, kResidualBytes).Add({})),
      policy_version_(gauges(*registry_, kPolicyVersion).Add({})),
      policy_version_received_(gauges(*registry_, kPolicyVersionReceived).Add({})),
      peers_up_(gauges(*registry_, kPeersUp).Add({})),
      fail_static_(gauges(*registry_, kFailStatic).Add({})),
      workers_(gauges(*registry_, kWorkers).Add({})),
      tensors_(gauges(*registry_, kTensors).Add({})),
      tensors_off_policy_(gauges(*registry_, kTensorsOffPolicy).Add({})),
      gpu_tensors_(gauges(*registry_, kGpuTensors)),
      gpu_tensors_on_gpu_(gpu_tensors_.Add({{"placement", "gpu"}})),
      gpu_tensors_on_cpu_(gpu_tensors_.Add({{"placement", "cpu"}})),
      placement_probe_rate_(gauges(*registry_, kPlacementProbeRate)),
      transport_bytes_sent_(counters(*registry_, kTransportBytesSent).Add({})),
      transport_bytes_received_(counters(*registry_, kTransportBytesReceived).Add({})),
      probes_sent_(counters(*registry_, kProbesSent).Add({})),
      transport_messages_sent_(counters(*registry_, kTransportMessagesSent).Add({})),
      transport_messages_received_(counters(*registry_, kTransportMessagesReceived).Add({})),
      retransmits_(counters(*registry_, kRetransmits).Add({})),
      reconnects_(counters(*registry_, kReconnects).Add({})),
      resent_bytes_(counters(*registry_, kResentBytes).Add({})),
      peers_down_(counters(*registry_, kPeersDown)),
      poll_cpu_seconds_(counters(*registry_, kPollCpuSeconds).Add({})),
      ingress_cuda_mappings_(gauges(*registry_, kIngressCudaMappings).Add({})) {}

GatewayMetrics::PerCodec& GatewayMetrics::codec_locked(std::string_view codec,
                                                       std::string_view device) {
  auto key = std::make_pair(std::string(codec), std::string(device));
  auto found = codecs_.find(key);
  if (found != codecs_.end()) return found->second;
  const prometheus::Labels labels{{"codec", key.first}};
  const prometheus::Labels kernel_labels{{"codec", key.first}, {"device", key.second}};
  PerCodec metrics{&raw_bytes_.Add(labels),
                   &wire_bytes_.Add(labels),
                   &steps_.Add(labels),
                   &encode_seconds_.Add(kernel_labels, seconds_buckets()),
                   &communicate_seconds_.Add(labels, seconds_buckets()),
                   &decode_seconds_.Add(kernel_labels, seconds_buckets())};
  return codecs_.emplace(std::move(key), metrics).first->second;
}

void GatewayMetrics::observe(const StepRecord& step) {
  std::lock_guard lock(mutex_);
  local_wait_seconds_.Observe(step.local_wait_seconds);
  if (!step.status.ok()) {
    errors_.Add({{"kind", std::string(error_code_name(step.status.code()))}}).Increment();
    return;
  }
  PerCodec& metrics = codec_locked(step.codec, step.device);
  metrics.raw_bytes->Increment(static_cast<double>(step.raw_bytes));
  metrics.wire_bytes->Increment(static_cast<double>(step.wire_bytes));
  metrics.steps->Increment();
  metrics.encode->Observe(step.encode_seconds);
  metrics.communicate->Observe(step.communicate_seconds);
  metrics.decode->Observe(step.decode_seconds);
  union_elements_.Increment(static_cast<double>(step.union_elements));
}

void GatewayMetrics::advance(prometheus::Counter& counter, uint64_t total, uint64_t& last) {
  if (total > last) counter.Increment(static_cast<double>(total - last));
  last = total;
}

void GatewayMetrics::refresh(const GatewaySnapshot& now) {
  std::lock_guard lock(mutex_);
  const uint64_t raw = now.core.raw_bytes - last_raw_, wire = now.core.wire_bytes - last_wire_;
  if (wire > 0) ratio_.Set(static_cast<double>(raw) / static_cast<double>(wire));
  last_raw_ = now.core.raw_bytes;
  last_wire_ = now.core.wire_bytes;
  target_ratio_.Set(now.target_ratio);
  for (const LinkEstimate& link : now.links) {
    const prometheus::Labels labels{{"peer", std::to_string(link.peer)}};
    link_bandwidth_.Add(labels).Set(link.goodput_bytes_per_second);
    link_rtt_.Add(labels).Set(link.rtt_seconds);
  }
  residual_bytes_.Set(static_cast<double>(now.core.residual_bytes));
  policy_version_.Set(now.core.applied_policy_version);
  policy_version_received_.Set(now.core.policy_version);
  peers_up_.Set(now.transport.peers_up);
  for (const auto& [peer, up] : now.peer_up) {
    peer_up_.Add({{"peer", std::to_string(peer)}}).Set(up ? 1.0 : 0.0);
  }
  fail_static_.Set(now.fail_static ? 1.0 : 0.0);
  workers_.Set(now.core.workers);
  tensors_.Set(now.core.tensors);
  tensors_off_policy_.Set(now.core.tensors_off_policy);
  gpu_tensors_on_gpu_.Set(now.core.gpu_tensors_on_gpu);
  gpu_tensors_on_cpu_.Set(now.core.gpu_tensors_on_cpu);
  for (const PlacementRecord& record : now.placement_probes) {
    const std::string codec(record.codec);
    placement_probe_rate_.Add({{"codec", codec}, {"device", "gpu"}})
        .Set(record.probe.gpu_elements_per_second);
    placement_probe_rate_.Add({{"codec", codec}, {"device", "cpu"}})
        .Set(record.probe.cpu_elements_per_second);
  }
  ingress_cuda_mappings_.Set(static_cast<double>(now.ingress.cuda_mappings));
  advance(transport_bytes_sent_, now.transport.bytes_sent, last_bytes_sent_);
  advance(transport_bytes_received_, now.transport.bytes_received, last_bytes_received_);
  advance(probes_sent_, now.transport.probes_sent, last_probes_);
  advance(transport_messages_sent_, now.transport.messages_sent, last_messages_sent_);
  advance(transport_messages_received_, now.transport.messages_received, last_messages_received_);
  advance(retransmits_, now.transport.retransmits, last_retransmits_);
  advance(reconnects_, now.transport.reconnects, last_reconnects_);
  advance(resent_bytes_, now.transport.resent_bytes, last_resent_bytes_);
  for (std::size_t reason = 0; reason < kPeerDownReasons; ++reason) {
    advance(
        peers_down_.Add({{"reason", peer_down_reason_name(static_cast<PeerDownReason>(reason))}}),
        now.transport.peers_down[reason], last_peers_down_[reason]);
  }
  if (now.transport.poll_cpu_seconds > last_poll_cpu_seconds_) {
    poll_cpu_seconds_.Increment(now.transport.poll_cpu_seconds - last_poll_cpu_seconds_);
    last_poll_cpu_seconds_ = now.transport.poll_cpu_seconds;
  }
  advance(errors_.Add({{"kind", "rejected_message"}}), now.transport.rejected, last_rejected_);
  advance(errors_.Add({{"kind", "foreign_connection"}}), now.transport.foreign, last_foreign_);
  advance(errors_.Add({{"kind", "refused_message"}}), now.mailbox.refused, last_refused_);
  advance(errors_.Add({{"kind", "worker_protocol_error"}}), now.ingress.protocol_errors,
          last_protocol_errors_);
  advance(errors_.Add({{"kind", "refused_connection"}}), now.ingress.connections_refused,
          last_connections_refused_);
  advance(errors_.Add({{"kind", "refused_worker"}}), now.ingress.workers_refused,
          last_workers_refused_);
  advance(errors_.Add({{"kind", "refused_declaration"}}), now.ingress.declarations_refused,
          last_declarations_refused_);
  advance(control_errors_.Add({{"kind", "unauthorized"}}), now.control_errors.unauthorized,
          last_control_errors_.unauthorized);
  advance(control_errors_.Add({{"kind", "refused"}}), now.control_errors.refused,
          last_control_errors_.refused);
  advance(control_errors_.Add({{"kind", "unusable_policy"}}), now.control_errors.unusable_policies,
          last_control_errors_.unusable_policies);
  advance(control_request_failures_.Add({{"exchange", "report"}}),
          now.control_request_failures.reports, last_control_request_failures_.reports);
  advance(control_request_failures_.Add({{"exchange", "policy"}}),
          now.control_request_failures.policies, last_control_request_failures_.policies);
}

}  // namespace gradgate::gateway
