#include "gateway/startup/daemon.h"

#include <malloc.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "gateway/core/gateway.h"
#include "gateway/ingress/ingress.h"
#include "gateway/ingress/joining_handler.h"
#include "gateway/startup/component_options.h"
#include "gateway/startup/job_joining.h"
#include "gateway/startup/stop_signals.h"
#include "gateway/telemetry/membership.h"
#include "gateway/telemetry/telemetry.h"

namespace gradgate::gateway {
namespace {

/// The transport job.transport names, and the port peers reach it on (TCP: the bound listener,
/// DPDK: this gateway's UDP port).
struct ChosenTransport {
  std::unique_ptr<Transport> transport;
  std::function<uint16_t()> port;
};

ChosenTransport make_transport(const GatewayConfig& config) {
#if GRADGATE_HAVE_DPDK
  if (config.transport == TransportKind::kDpdk) {
    DpdkTransportOptions options = dpdk_options(config);
    const uint16_t port = options.peers[options.rank].port;
    return {std::make_unique<DpdkTransport>(std::move(options)), [port] { return port; }};
  }
#endif
  TcpTransportOptions options = tcp_options(config);
  if (config.size > 0) {  // addresses from the controller: registered once the listener is bound
    options.resolve_peers = [&config](uint16_t port) -> Result<std::vector<net::Endpoint>> {
      auto membership = membership_options(config);
      if (!membership.ok()) return membership.status();
      return join_through_controller(*membership, port, pause_unless_stopped);
    };
  }
  auto tcp = std::make_unique<TcpTransport>(std::move(options));
  TcpTransport* listener = tcp.get();
  return {std::move(tcp), [listener] { return listener->listen_port(); }};
}

Status write_ready_file(const std::string& path, uint16_t port, uint16_t admin_port,
                        const GatewayConfig& config) {
  const nlohmann::json ready = {{"port", port},
                                {"admin_port", admin_port},
                                {"socket", config.socket_path},
                                {"rank", config.node_rank}};
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << ready.dump() << "\n";
    if (!out.flush()) {
      return Status(ErrorCode::kUnavailable, "cannot write the ready file " + temporary);
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return Status(ErrorCode::kUnavailable, "cannot rename " + temporary + " to " + path);
  }
  return {};
}

void log_summary(const Gateway& gateway, const Transport& transport) {
  const GatewayStats stats = gateway.stats();
  const TransportStats link = transport.stats();
  const MailboxStats mail = gateway.mailbox_stats();
  const double ratio =
      stats.raw_bytes ? static_cast<double>(stats.wire_bytes) / static_cast<double>(stats.raw_bytes)
                      : 0.0;
  spdlog::info(
      "workers {} tensors {} all-reduces {} errors {} raw_bytes {} wire_bytes {} wire/raw {:.4f} "
      "union_elements {} residual_bytes {} peers_up {} rejected {} foreign {} late {}",
      stats.workers, stats.tensors, stats.allreduces, stats.allreduce_errors, stats.raw_bytes,
      stats.wire_bytes, ratio, stats.union_elements, stats.residual_bytes, link.peers_up,
      link.rejected, link.foreign, mail.late);
}

// Joins the job (its rank, DPDK attachment, peers), then serves the workers until a stop signal.
Status join_and_serve(const GatewayConfig& config, const DaemonOptions& options,
                      JoiningHandler& joining, IngressServer& ingress) {
  // With job.size the addresses come from the controller: for TCP when the transport starts
  // (until then the job's gateways are known by number only), for DPDK before it is made.
  GatewayConfig job = config;
  const std::string of_job = "job " + std::to_string(job.job_id);
  if (job.node_rank_auto) {
    joining.set_stage("claiming its rank of " + of_job + " from the controller");
    GRADGATE_RETURN_IF_ERROR(claim_rank(job));
  }
  if (job.dpdk_from_network_status()) {
    joining.set_stage("waiting for its DPDK network in the pod's network-status");
    GRADGATE_RETURN_IF_ERROR(take_dpdk_attachment(job));
  }
  joining.set_stage(job.nodes.empty()
                        ? "waiting for the " + std::to_string(job.size) + " gateways of " + of_job +
                              " to register with the controller"
                        : "starting its transport");
  if (job.nodes.empty() && job.transport == TransportKind::kDpdk) {
    GRADGATE_RETURN_IF_ERROR(join_for_dpdk(job));
  }
  if (job.nodes.empty()) job.nodes.assign(job.size, net::Endpoint{});
  auto telemetry_settings = telemetry_options(job);
  if (!telemetry_settings.ok()) return telemetry_settings.status();
  ChosenTransport chosen = make_transport(job);
  Transport& transport = *chosen.transport;
  Gateway gateway(core_options(job), transport);
  // However this function ends, the ingress stops before the gateway that its sessions call goes.
  const auto stop_ingress = [](IngressServer* server) { server->stop(); };
  const std::unique_ptr<IngressServer, decltype(stop_ingress)> ingress_stopper(&ingress,
                                                                               stop_ingress);
  Telemetry telemetry(std::move(telemetry_settings).value(), gateway, transport);
  GRADGATE_RETURN_IF_ERROR(gateway.start());
  // Telemetry first: the steps that workers start once the ingress serves report to it.
  telemetry.watch_ingress(ingress);
  if (Status serving = telemetry.start(chosen.port()); !serving.ok()) {
    telemetry.stop();
    gateway.stop();
    return serving;
  }
  joining.serve(gateway);
  spdlog::info("gateway {} of {} (job {}): peers on port {}, workers on {}, codec {}",
               job.node_rank, job.nodes.size(), config.job_id, chosen.port(), config.socket_path,
               config.codec);
  if (job.transport == TransportKind::kDpdk &&
      job.dpdk_inject_drop + job.dpdk_inject_duplicate + job.dpdk_inject_reorder > 0.0) {
    spdlog::warn(
        "dpdk fault injection is on: {} of outgoing datagrams dropped, {} duplicated, {} "
        "reordered (dpdk.inject_*)",
        job.dpdk_inject_drop, job.dpdk_inject_duplicate, job.dpdk_inject_reorder);
  }
  if (!options.ready_file.empty()) {
    Status ready = write_ready_file(options.ready_file, chosen.port(), telemetry.admin_port(), job);
    if (!ready.ok()) spdlog::error("{}", ready.to_string());
  }
  wait_for_stop_signal(options.stats_interval_seconds, [&] { log_summary(gateway, transport); });
  telemetry.stop();
  ingress.stop();  // before the gateway that its sessions call
  gateway.stop();
  log_summary(gateway, transport);
  return {};
}

}  // namespace

Status run_daemon(const GatewayConfig& config, const DaemonOptions& options) {
  // Frames of large tensors are allocated and freed every step. Served from the heap and kept
  // there when freed, their pages are not faulted in again at every step (the heap stays at its
  // peak size instead). One arena: a frame received by the transport thread is freed by the
  // all-reduce thread, and a per-thread arena would give its pages back at every step.
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  // Block the stop signals before any thread starts, so that only sigtimedwait receives them.
  block_stop_signals();

  // The workers' socket from the start: a worker that connects while the gateway joins its job
  // is told what it waits for and tries again (joining_handler.h).
  JoiningHandler joining;
  auto ingress = make_unix_ingress_server(config.socket_path);
  GRADGATE_RETURN_IF_ERROR(ingress->start(joining));
  Status joined = join_and_serve(config, options, joining, *ingress);
  ingress->stop();
  return joined;
}

}  // namespace gradgate::gateway
