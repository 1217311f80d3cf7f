#include "gateway/startup/component_options.h"

#include <algorithm>

namespace gradgate::gateway {

Gateway::Options core_options(const GatewayConfig& config) {
  const TensorCodecs::Settings codecs{
      config.codec,         config.min_compress_elements,
      config.collective,    config.placement,
      config.job_id,        static_cast<uint32_t>(config.nodes.size()),
      config.node_rank,     config.local_workers,
      config.segment_bytes, config.residual_memory_cap_bytes};
  return {codecs, config.timeout, config.send_queue_bytes};
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

}  // namespace gradgate::gateway
