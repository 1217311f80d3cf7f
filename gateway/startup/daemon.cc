#include "gateway/telemetry/daemon.h"

#include <malloc.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/config/config_source.h"
#include "gateway/config/network_status.h"
#include "gateway/core/gateway.h"
#include "gateway/ingress/ingress.h"
#include "gateway/ingress/joining_handler.h"
#include "gateway/telemetry/membership.h"
#include "gateway/telemetry/telemetry.h"
#include "gateway/transport/tcp_transport.h"
#include "gradgate/config.h"
#if GRADGATE_HAVE_DPDK
#include "gateway/transport/dpdk_transport.h"
#endif

namespace gradgate::gateway {
namespace {

// How often a gateway looks again for its network in the pod's network-status.
constexpr std::chrono::milliseconds kNetworkStatusPoll{500};

// SIGINT and SIGTERM: what stops the daemon.
sigset_t stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  return signals;
}

// Waits up to `pause` for a stop signal (blocked in every thread): false once one came.
bool pause_unless_stopped(std::chrono::milliseconds pause) {
  const sigset_t signals = stop_signals();
  timespec timeout{static_cast<time_t>(pause.count() / 1000),
                   static_cast<long>(pause.count() % 1000) * 1000000L};
  const int signal = sigtimedwait(&signals, nullptr, &timeout);
  return signal != SIGINT && signal != SIGTERM;
}

TcpTransportOptions transport_options(const GatewayConfig& config) {
  TcpTransportOptions options;
  options.job_id = config.job_id;
  options.rank = config.node_rank;
  options.peers = config.nodes;
  options.listen = config.listen;  // the loader defaults it to job.nodes[job.node_rank]
  options.connect_timeout = config.connect_timeout;
  options.reconnect_min = config.reconnect_min;
  options.reconnect_max = config.reconnect_max;
  options.send_queue_bytes = config.send_queue_bytes;
  options.max_message_bytes = config.max_message_bytes;
  options.probe_interval = config.probe_interval;
  options.peer_timeout = config.peer_timeout;
  if (config.size > 0) {  // addresses from the controller: registered once the listener is bound
    options.resolve_peers = [&config](uint16_t port) -> Result<std::vector<net::Endpoint>> {
      auto controller = controller_options(config);
      if (!controller.ok()) return controller.status();
      return join_through_controller(config, port, *controller, pause_unless_stopped);
    };
  }
  return options;
}

#if GRADGATE_HAVE_DPDK
DpdkTransportOptions dpdk_options(const GatewayConfig& config) {
  DpdkTransportOptions options;
  options.job_id = config.job_id;
  options.rank = config.node_rank;
  options.peers = config.nodes;
  if (config.dpdk_udp_port != 0) {
    for (net::Endpoint& peer : options.peers)
      peer.port = static_cast<uint16_t>(config.dpdk_udp_port);
  }
  options.eal.cores = config.dpdk_cores;
  options.eal.memory_mb = config.dpdk_memory_mb;
  options.eal.no_huge = config.dpdk_no_huge;
  options.eal.no_pci = config.dpdk_port.starts_with("net_");  // a vdev: no PCI scan needed
  options.eal.extra_args = config.dpdk_eal_args;
  options.port.device = config.dpdk_port;
  options.port.mtu = config.dpdk_mtu;
  options.port.mbufs = config.dpdk_mbufs;
  options.send_queue_bytes = config.send_queue_bytes;
  options.max_message_bytes = std::min(config.max_message_bytes, config.send_queue_bytes);
  options.message_deadline = config.timeout;
  options.idle_sleep = std::chrono::microseconds(config.dpdk_idle_sleep_us);
  options.impairments = {config.dpdk_inject_drop, config.dpdk_inject_duplicate,
                         config.dpdk_inject_reorder, config.dpdk_inject_seed};
  return options;
}
#endif

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
  auto tcp = std::make_unique<TcpTransport>(transport_options(config));
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

// Waits for a stop signal (blocked in every thread), logging a summary now and then.
void wait_for_stop_signal(const Gateway& gateway, const Transport& transport, double interval) {
  const sigset_t signals = stop_signals();
  const double wait = interval > 0 ? interval : 3600.0;
  timespec timeout{static_cast<time_t>(wait), static_cast<long>((wait - std::floor(wait)) * 1e9)};
  for (;;) {
    const int signal = sigtimedwait(&signals, nullptr, &timeout);
    if (signal == SIGINT || signal == SIGTERM) {
      spdlog::info("signal {}: stopping", signal);
      return;
    }
    if (signal < 0 && errno == EAGAIN && interval > 0) log_summary(gateway, transport);
  }
}

// The log line prefix names the gateway's rank ("?" until the controller assigned it).
void set_log_pattern(const GatewayConfig& config) {
  const std::string rank =
      config.node_rank_auto ? std::string("\"?\"") : std::to_string(config.node_rank);
  if (config.log_format == "json") {
    spdlog::set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","rank":)" + rank + R"(,"msg":"%v"})",
        spdlog::pattern_time_type::utc);
  } else {
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [gateway " + rank + "] %v");
  }
}

// Kubernetes: this gateway's address on its DPDK port, and the port unless dpdk.port names one,
// from the pod's network-status. The kubelet refreshes the annotations file some time after the
// start, so a network not listed yet is waited for, up to dpdk.network_wait_ms.
Status take_dpdk_attachment(GatewayConfig& config) {
  const std::string& path = config.dpdk_network_status_file;
  const auto deadline = std::chrono::steady_clock::now() + config.dpdk_network_wait;
  for (bool waiting = false;; waiting = true) {
    // A file that is missing or unreadable is a mistake of the pod's spec: no use waiting.
    auto text = config::read_config_file(path, "dpdk.network_status_file");
    if (!text.ok()) return Status(ErrorCode::kInvalidArgument, text.status().message());
    auto attachment = find_dpdk_attachment(*text, config.dpdk_network);
    if (attachment.ok()) {
      config.listen.host = attachment->ipv4;
      if (config.dpdk_port.empty()) config.dpdk_port = attachment->port;
      spdlog::info("dpdk: network {} gives address {}, port {}", attachment->name, attachment->ipv4,
                   config.dpdk_port);
      return {};
    }
    const Status& missing = attachment.status();
    if (missing.code() != ErrorCode::kNotFound) {
      return Status(missing.code(), path + ": " + missing.message());
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status(ErrorCode::kTimeout, path + ": " + missing.message() + " after " +
                                             std::to_string(config.dpdk_network_wait.count()) +
                                             " ms (dpdk.network_wait_ms)");
    }
    if (!waiting) spdlog::info("dpdk: waiting for {}: {}", path, missing.message());
    if (!pause_unless_stopped(kNetworkStatusPoll)) {
      return Status(ErrorCode::kAborted, "stopped while waiting for the network-status");
    }
  }
}

// DPDK with job.size: the transport needs every peer's address when it is made, so they come
// from the controller first (this gateway registers transport.listen's host and dpdk.udp_port).
Status join_for_dpdk(GatewayConfig& config) {
  auto controller = controller_options(config);
  if (!controller.ok()) return controller.status();
  auto nodes = join_through_controller(config, static_cast<uint16_t>(config.dpdk_udp_port),
                                       *controller, pause_unless_stopped);
  if (!nodes.ok()) return nodes.status();
  config.nodes = std::move(nodes).value();
  return {};
}

// `job.node_rank: auto`: takes the rank the controller assigns to this node's name.
Status claim_rank(GatewayConfig& config) {
  auto controller = controller_options(config);
  if (!controller.ok()) return controller.status();
  auto rank = claim_rank_through_controller(config, *controller, pause_unless_stopped);
  if (!rank.ok()) return rank.status();
  config.node_rank = *rank;
  config.node_rank_auto = false;
  set_log_pattern(config);
  return {};
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
  ChosenTransport chosen = make_transport(job);
  Transport& transport = *chosen.transport;
  Gateway gateway(job, transport);
  // However this function ends, the ingress stops before the gateway that its sessions call goes.
  const auto stop_ingress = [](IngressServer* server) { server->stop(); };
  const std::unique_ptr<IngressServer, decltype(stop_ingress)> ingress_stopper(&ingress,
                                                                               stop_ingress);
  Telemetry telemetry(job, gateway, transport);
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
  wait_for_stop_signal(gateway, transport, options.stats_interval_seconds);
  telemetry.stop();
  ingress.stop();  // before the gateway that its sessions call
  gateway.stop();
  log_summary(gateway, transport);
  return {};
}

}  // namespace

void configure_logging(const GatewayConfig& config) {
  auto logger = spdlog::stderr_color_mt("gradgate");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  set_log_pattern(config);
}

Status run_daemon(const GatewayConfig& config, const DaemonOptions& options) {
  // Frames of large tensors are allocated and freed every step. Served from the heap and kept
  // there when freed, their pages are not faulted in again at every step (the heap stays at its
  // peak size instead). One arena: a frame received by the transport thread is freed by the
  // all-reduce thread, and a per-thread arena would give its pages back at every step.
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  // Block the stop signals before any thread starts, so that only sigtimedwait receives them.
  sigset_t blocked = stop_signals();
  sigaddset(&blocked, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &blocked, nullptr);

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
