// The gateway's configuration: what `gradgate gateway -c FILE` reads, with every key documented
// in docs/configuration.md and an example in config/gateway.yaml. Loading checks everything and
// reports every problem with its key path, so that a bad file fails at start, whole, not at the
// first all-reduce.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/net/endpoint.h"
#include "gradgate/base/collective_mode.h"
#include "gradgate/base/placement_mode.h"
#include "gradgate/base/status.h"

namespace gradgate::gateway {

/// How gateways reach each other (job.transport).
enum class TransportKind {
  kTcp,   // TcpTransport: kernel sockets, works everywhere
  kDpdk,  // DpdkTransport: kernel bypass on a DPDK port (builds with DPDK only)
};

struct GatewayConfig {
  // job: who takes part. Static membership; the control plane makes it dynamic later.
  uint64_t job_id = 1;
  std::vector<net::Endpoint> nodes;  // every gateway's peer address, by rank
  uint32_t node_rank = 0;            // this gateway's index in `nodes`
  /// `job.node_rank: auto` (with `size`): the controller hands out the rank by `node_name`,
  /// so that identical gateways (a Kubernetes DaemonSet) need no per-node setting.
  bool node_rank_auto = false;
  std::string node_name;  // the name a rank is claimed under; "" = this machine's host name
  /// Instead of `nodes`: the number of gateways, whose addresses come from the controller
  /// (control.url): each registers its transport.listen address and waits for the others.
  uint32_t size = 0;
  uint32_t local_workers = 1;  // training processes that connect to this gateway
  TransportKind transport = TransportKind::kTcp;

  // ingress: how local workers reach the gateway.
  std::string socket_path = "/tmp/gradgate.sock";

  // compression
  std::string codec = "topk:density=0.01";  // codec spec, see docs/codecs.md
  CollectiveMode collective = CollectiveMode::kAuto;
  PlacementMode placement = PlacementMode::kAuto;
  uint64_t min_compress_elements = 1024;  // smaller tensors travel uncompressed (codec none)

  // transport
  net::Endpoint listen;  // where peers connect; default: nodes[node_rank] with its port
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds reconnect_min{50};      // first reconnection delay
  std::chrono::milliseconds reconnect_max{2000};    // backoff doubles up to this
  uint64_t send_queue_bytes = uint64_t{512} << 20;  // per peer; beyond it send() refuses
  uint64_t max_message_bytes = uint64_t{1} << 30;   // larger messages are malformed
  std::chrono::milliseconds probe_interval{1000};   // idle links probed; 0: never
  std::chrono::milliseconds peer_timeout{20000};  // a peer of which nothing moved is down after it

  // dpdk: the DPDK transport (job.transport: dpdk). job.nodes are IPv4 addresses and UDP ports.
  std::string dpdk_cores = "0";    // EAL lcores (-l)
  uint32_t dpdk_memory_mb = 1024;  // EAL memory (-m)
  bool dpdk_no_huge = false;       // ordinary pages instead of huge pages
  std::string dpdk_port;           // vdev string ("net_af_packet0,iface=eth1") or PCI address
  uint32_t dpdk_mtu = 1500;        // IP bytes per frame
  uint32_t dpdk_mbufs = 8191;      // frame buffers in the pool
  uint32_t dpdk_udp_port = 0;      // every gateway's UDP port; 0: each job.nodes entry's port
  std::vector<std::string> dpdk_eal_args;  // more EAL arguments, as given
  uint32_t dpdk_idle_sleep_us = 0;         // 0: the polling thread spins when idle
  // Kubernetes with Multus: this gateway's DPDK address (and dpdk.port when empty) from the
  // pod's network-status annotation (gateway/config/network_status.h), read at start.
  std::string dpdk_network_status_file;  // the downward API annotations file; "": not used
  std::string dpdk_network;              // the attachment to take: "namespace/name" or "name"
  std::chrono::milliseconds dpdk_network_wait{120000};  // how long to wait for it to be listed
  /// The DPDK address (and, with dpdk.port empty, the port) comes from the network-status.
  bool dpdk_from_network_status() const {
    return transport == TransportKind::kDpdk && !dpdk_network_status_file.empty() &&
           !dpdk_network.empty();
  }
  // Fault injection: fractions of outgoing datagrams dropped, sent twice, held back behind the
  // next one (reordered), drawn from inject_seed. For testing the reliability layer; all 0 in
  // production.
  double dpdk_inject_drop = 0.0;
  double dpdk_inject_duplicate = 0.0;
  double dpdk_inject_reorder = 0.0;
  uint64_t dpdk_inject_seed = 1;

  // collective
  std::chrono::milliseconds timeout{30000};  // an all-reduce not done by then fails
  /// Parts of a tensor larger than this (bytes of fp32 sum) are cut into segments that stream
  /// through the collective one after the other; 0: never. The same on every gateway of a job.
  uint64_t segment_bytes = uint64_t{4} << 20;

  // streams: error-feedback residuals per (job, tensor)
  uint64_t residual_memory_cap_bytes = uint64_t{8} << 30;

  // admin: the gateway's own HTTP API (/livez, /readyz, /metrics, /v1/status)
  net::Endpoint admin_listen{"127.0.0.1", 0};  // port 0: any free port (the ready file tells which)
  uint32_t admin_max_connections = 64;         // served at once; more are answered 503 and closed

  // control: the controller this gateway reports to and takes policies from ("" url: none)
  net::Endpoint controller;        // host:port; an empty host: none
  std::string control_token_file;  // bearer token; wins over the variable
  std::string control_token_env = "GRADGATE_API_TOKEN";
  std::chrono::milliseconds control_report_interval{1000};  // reports and metric refreshes
  std::chrono::milliseconds control_poll_wait{2000};        // one long poll for a new policy
  /// One request to the controller (a policy request: this beyond control_poll_wait); by default
  /// longer than report intervals, so that a slow link delays reports rather than failing them.
  std::chrono::milliseconds control_request_timeout{10000};
  std::chrono::milliseconds control_join_timeout{120000};  // job.size: waiting for the others

  // logging
  std::string log_level = "info";   // trace, debug, info, warn, error
  std::string log_format = "text";  // text, json
};

/// Reads and checks a YAML file. Errors name the file and every bad key ("job.nodes[1]: ...").
/// Unknown keys are errors (a typo must not silently fall back to a default). Afterwards,
/// environment variables GRADGATE_<SECTION>_<KEY> (e.g. GRADGATE_JOB_NODE_RANK) override keys,
/// and then `overrides` ("section.key=value", from the command line's --set) override those.
Result<GatewayConfig> load_gateway_config(const std::string& path,
                                          const std::vector<std::string>& overrides = {});

/// The same from YAML text (`origin` names it in messages) and an explicit environment, for tests.
Result<GatewayConfig> parse_gateway_config(const std::string& yaml, const std::string& origin,
                                           const std::map<std::string, std::string>& env,
                                           const std::vector<std::string>& overrides = {});

/// Every problem of a config as "key.path: what is wrong"; empty when it is usable.
std::vector<std::string> validate_gateway_config(const GatewayConfig& config);

}  // namespace gradgate::gateway
