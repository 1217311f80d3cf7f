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

}  // namespace

GatewayMetrics::GatewayMetrics(std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)),
      raw_bytes_(BuildCounter()
                     .Name("gradgate_raw_bytes_total")
                     .Help("Bytes of the node sums all-reduced, in their dtype (what DDP would "
                           "send), by codec")
                     .Register(*registry_)),
      wire_bytes_(
          BuildCounter()
              .Name("gradgate_wire_bytes_total")
              .Help("Bytes this gateway sent to other gateways for its all-reduces, by codec")
              .Register(*registry_)),
      steps_(BuildCounter()
                 .Name("gradgate_allreduces_total")
                 .Help("Tensor all-reduces completed, by codec")
                 .Register(*registry_)),
      errors_(BuildCounter()
                  .Name("gradgate_errors_total")
                  .Help("Errors by kind: failed all-reduces by error code, rejected and foreign "
                        "transport messages, messages the mailbox refused, malformed messages "
                        "from workers, worker connections refused for lack of file descriptors, "
                        "workers refused at connect, declarations refused")
                  .Register(*registry_)),
      control_errors_(BuildCounter()
                          .Name("gradgate_control_errors_total")
                          .Help("The controller's refusals by kind: unauthorized (401, 403: the "
                                "token), refused (other error answers), unusable_policy "
                                "(policies this gateway could not take)")
                          .Register(*registry_)),
      control_request_failures_(
          BuildCounter()
              .Name("gradgate_control_request_failures_total")
              .Help("Requests to the controller that got no answer (unreachable, or past "
                    "control.request_timeout_ms), by exchange: report, policy")
              .Register(*registry_)),
      encode_seconds_(
          BuildHistogram()
              .Name("gradgate_encode_seconds")
              .Help("Encode time of one tensor all-reduce on this gateway, by codec and device "
                    "(cpu, gpu)")
              .Register(*registry_)),
      local_wait_seconds_(BuildHistogram()
                              .Name("gradgate_local_wait_seconds")
                              .Help("From the first local worker's all-reduce request of a step "
                                    "to the last's: how long the node's stragglers lag")
                              .Register(*registry_)
                              .Add({}, seconds_buckets())),
      communicate_seconds_(BuildHistogram()
                               .Name("gradgate_communicate_seconds")
                               .Help("Time one tensor all-reduce spent sending and waiting, by "
                                     "codec")
                               .Register(*registry_)),
      decode_seconds_(
          BuildHistogram()
              .Name("gradgate_decode_seconds")
              .Help("Decode and add time of one tensor all-reduce, by codec and device (cpu, "
                    "gpu)")
              .Register(*registry_)),
      union_elements_(BuildCounter()
                          .Name("gradgate_aggregator_union_elements_total")
                          .Help("Aggregator mode: nonzero elements of the sums this gateway "
                                "aggregated (the union of the workers' indices)")
                          .Register(*registry_)
                          .Add({})),
      ratio_(BuildGauge()
                 .Name("gradgate_compression_ratio")
                 .Help("Raw bytes over wire bytes of the all-reduces since the last refresh")
                 .Register(*registry_)
                 .Add({})),
      target_ratio_(BuildGauge()
                        .Name("gradgate_target_ratio")
                        .Help("Raw over wire bytes the controller's policy aims at (0: no policy)")
                        .Register(*registry_)
                        .Add({})),
      link_bandwidth_(BuildGauge()
                          .Name("gradgate_link_bandwidth_bytes_per_second")
                          .Help("Goodput estimate of the link from each peer to this gateway")
                          .Register(*registry_)),
      link_rtt_(BuildGauge()
                    .Name("gradgate_link_rtt_seconds")
                    .Help("Smoothed round-trip time of the connection to each peer")
                    .Register(*registry_)),
      peer_up_(BuildGauge()
                   .Name("gradgate_peer_up")
                   .Help("1 while the connection to the peer is up, 0 while it is down")
                   .Register(*registry_)),
      residual_bytes_(BuildGauge()
                          .Name("gradgate_residual_memory_bytes")
                          .Help("Memory held by error-feedback residuals and node sums")
                          .Register(*registry_)
                          .Add({})),
      policy_version_(BuildGauge()
                          .Name("gradgate_policy_version")
                          .Help("Newest policy version a step has run under (0: the config)")
                          .Register(*registry_)
                          .Add({})),
      policy_version_received_(BuildGauge()
                                   .Name("gradgate_policy_version_received")
                                   .Help("Newest policy version received from the controller")
                                   .Register(*registry_)
                                   .Add({})),
      peers_up_(BuildGauge()
                    .Name("gradgate_peers_up")
                    .Help("Other gateways of the job connected now")
                    .Register(*registry_)
                    .Add({})),
      fail_static_(BuildGauge()
                       .Name("gradgate_fail_static")
                       .Help("1 while the controller is unreachable and the last policy stays")
                       .Register(*registry_)
                       .Add({})),
      workers_(BuildGauge()
                   .Name("gradgate_local_workers")
                   .Help("Local workers connected")
                   .Register(*registry_)
                   .Add({})),
      tensors_(BuildGauge()
                   .Name("gradgate_tensors")
                   .Help("Tensors declared")
                   .Register(*registry_)
                   .Add({})),
      tensors_off_policy_(BuildGauge()
                              .Name("gradgate_tensors_off_policy")
                              .Help("Tensors that keep a codec other than their policy's, which "
                                    "compression.collective cannot run")
                              .Register(*registry_)
                              .Add({})),
      gpu_tensors_(BuildGauge()
                       .Name("gradgate_gpu_tensors")
                       .Help("Tensors whose buffers are GPU memory, by where their codec runs "
                             "(gpu; cpu: the node sum staged through host memory)")
                       .Register(*registry_)),
      gpu_tensors_on_gpu_(gpu_tensors_.Add({{"placement", "gpu"}})),
      gpu_tensors_on_cpu_(gpu_tensors_.Add({{"placement", "cpu"}})),
      placement_probe_rate_(BuildGauge()
                                .Name("gradgate_placement_probe_elements_per_second")
                                .Help("One step of a codec (encode, frame staging, decode) as the "
                                      "placement probe measured it, by codec and device (gpu, "
                                      "cpu)")
                                .Register(*registry_)),
      transport_bytes_sent_(
          BuildCounter()
              .Name("gradgate_transport_sent_bytes_total")
              .Help("Bytes written to other gateways, framing and probes included")
              .Register(*registry_)
              .Add({})),
      transport_bytes_received_(BuildCounter()
                                    .Name("gradgate_transport_received_bytes_total")
                                    .Help("Bytes read from other gateways, framing and probes "
                                          "included")
                                    .Register(*registry_)
                                    .Add({})),
      probes_sent_(BuildCounter()
                       .Name("gradgate_link_probes_total")
                       .Help("Probes sent to measure idle links")
                       .Register(*registry_)
                       .Add({})),
      transport_messages_sent_(BuildCounter()
                                   .Name("gradgate_transport_messages_sent_total")
                                   .Help("Messages delivered to other gateways (acknowledged, "
                                         "where the transport acknowledges)")
                                   .Register(*registry_)
                                   .Add({})),
      transport_messages_received_(BuildCounter()
                                       .Name("gradgate_transport_messages_received_total")
                                       .Help("Whole messages received from other gateways")
                                       .Register(*registry_)
                                       .Add({})),
      retransmits_(BuildCounter()
                       .Name("gradgate_transport_retransmits_total")
                       .Help("Datagrams sent again after a timeout or a loss (DPDK transport)")
                       .Register(*registry_)
                       .Add({})),
      reconnects_(BuildCounter()
                      .Name("gradgate_transport_reconnects_total")
                      .Help("Connections that carried a live session on after one broke (TCP)")
                      .Register(*registry_)
                      .Add({})),
      resent_bytes_(BuildCounter()
                        .Name("gradgate_transport_resent_bytes_total")
                        .Help("Bytes of messages written again after a reconnection (TCP)")
                        .Register(*registry_)
                        .Add({})),
      peers_down_(BuildCounter()
                      .Name("gradgate_peers_down_total")
                      .Help("Other gateways of the job reported down, by reason")
                      .Register(*registry_)),
      poll_cpu_seconds_(BuildCounter()
                            .Name("gradgate_transport_poll_cpu_seconds_total")
                            .Help("CPU time of the thread that polls the DPDK port")
                            .Register(*registry_)
                            .Add({})),
      ingress_cuda_mappings_(BuildGauge()
                                 .Name("gradgate_ingress_cuda_mappings")
                                 .Help("Workers' GPU allocations open through CUDA IPC now")
                                 .Register(*registry_)
                                 .Add({})) {}

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
