#include "gateway/startup/component_options.h"

#include <unistd.h>

#include <algorithm>

#include "common/http/token.h"
#include "gateway/config/config_text.h"

namespace gradgate::gateway {

namespace {

JobShape job_shape(const GatewayConfig& config) {
  return {config.job_id, static_cast<uint32_t>(config.nodes.size()), config.node_rank,
          config.local_workers};
}

// The name this gateway claims its rank under: job.node_name, or the host name.
std::string node_name_of(const GatewayConfig& config) {
  if (!config.node_name.empty()) return config.node_name;
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "localhost";
  return host;
}

// Membership through `controller` (controller_options(config), loaded once).
MembershipOptions membership_through(const GatewayConfig& config, http::ClientOptions controller) {
  MembershipOptions options;
  options.controller = std::move(controller);
  options.job_id = config.job_id;
  options.size = config.size;
  options.node_rank = config.node_rank;
  options.node_name = node_name_of(config);
  options.listen_host = config.listen.host;
  options.retry_interval = config.control_report_interval;
  options.join_timeout = config.control_join_timeout;
  return options;
}

}  // namespace

Gateway::Options core_options(const GatewayConfig& config) {
  const JobShape job = job_shape(config);
  const TensorCodecs::Settings codecs{config.codec,         config.min_compress_elements,
                                      config.collective,    config.placement,
                                      config.segment_bytes, config.residual_memory_cap_bytes};
  return {job, codecs, config.timeout, config.send_queue_bytes};
}

TcpTransportOptions tcp_options(const GatewayConfig& config) {
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

Result<http::ClientOptions> controller_options(const GatewayConfig& config) {
  auto token = http::load_optional_token(config.control_token_file, config.control_token_env);
  if (!token.ok()) return Status(token.status().code(), "control: " + token.status().message());
  http::ClientOptions options;
  options.host = config.controller.host;
  options.port = config.controller.port;
  options.token = std::move(token).value();
  options.timeout = config.control_request_timeout;
  return options;
}

Result<MembershipOptions> membership_options(const GatewayConfig& config) {
  auto controller = controller_options(config);
  if (!controller.ok()) return controller.status();
  return membership_through(config, std::move(controller).value());
}

Result<Telemetry::Options> telemetry_options(const GatewayConfig& config) {
  Telemetry::Options options;
  options.job = job_shape(config);
  options.listen_host = config.listen.host;
  options.transport = std::string(transport_kind_name(config.transport));
  options.admin_listen = config.admin_listen;
  options.admin_max_connections = config.admin_max_connections;
  options.report_interval = config.control_report_interval;
  if (config.controller.host.empty()) return options;
  auto server = controller_options(config);
  if (!server.ok()) return server.status();
  ControlClientOptions control;
  control.server = std::move(server).value();
  control.job_id = config.job_id;
  control.node = config.node_rank;
  control.poll_wait = config.control_poll_wait;
  control.retry_delay = config.control_report_interval;
  control.report_interval = config.control_report_interval;
  // With job.size the membership asks the same controller: its token is read once.
  if (config.size > 0) options.membership = membership_through(config, control.server);
  options.control = std::move(control);
  return options;
}

}  // namespace gradgate::gateway
