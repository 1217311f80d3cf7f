#include "gateway/config/config_rules.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "gradgate/base/job_limits.h"
#include "gradgate/config.h"
#include "gradgate/kernels/codec_spec.h"

namespace gradgate::gateway {
namespace {

// sockaddr_un::sun_path holds 108 bytes, the terminating zero included.
constexpr std::size_t kMaxSocketPathBytes = 107;
// A DNS name's length, which Kubernetes node names follow.
constexpr std::size_t kMaxNodeNameBytes = 253;

// The DPDK transport's frame sizes: the smallest MTU that leaves room for a useful payload, and
// jumbo frames.
constexpr uint32_t kMinDpdkMtu = 128;
constexpr uint32_t kMaxDpdkMtu = 9000;
constexpr uint32_t kMinDpdkMbufs = 1023;

constexpr std::array<std::string_view, 5> kLogLevels{"trace", "debug", "info", "warn", "error"};
constexpr std::array<std::string_view, 2> kLogFormats{"text", "json"};

// Smaller segments would turn a tensor into thousands of frames, each with its header and message.
constexpr uint64_t kMinSegmentBytes = 64 << 10;
// What a segment's message carries besides its fp32 bytes under the largest dense codec (none):
// the frame header (48), the envelope (40), the transport's length and a codec's prefix, rounded
// up.
constexpr uint64_t kSegmentMessageOverhead = 256;
// A per-peer send queue beyond 1 TiB is a typo; the mailbox's cap, send_queue_bytes x (nodes - 1),
// must not overflow either.
constexpr uint64_t kMaxSendQueueBytes = uint64_t{1} << 40;

// One request to the controller: under 100 ms a busy controller's answers would time out on a
// healthy network; beyond 10 minutes a controller that went silent would go unnoticed (no
// fail-static) that long.
constexpr int64_t kMinRequestTimeoutMs = 100;
constexpr int64_t kMaxRequestTimeoutMs = 600000;

class Checker {
 public:
  std::vector<ConfigIssue> run(const GatewayConfig& config) && {
    check_membership(config);
    if (config.local_workers == 0) {
      issue("job.local_workers", "must be at least 1", {"job.local_workers"});
    }
    check_positive("admin.max_connections", config.admin_max_connections);
    check_ingress(config);
    check_compression(config);
    check_transport(config);
    if (config.transport == TransportKind::kDpdk) check_dpdk(config);
    check_control(config);
    check_positive("collective.timeout_ms", config.timeout.count());
    if (config.segment_bytes != 0 && config.segment_bytes < kMinSegmentBytes) {
      issue("collective.segment_bytes",
            "must be 0 (never cut) or at least " + std::to_string(kMinSegmentBytes) +
                " bytes, got " + std::to_string(config.segment_bytes),
            {"collective.segment_bytes"});
    }
    if (config.segment_bytes != 0) check_segment_messages(config);
    check_positive("streams.residual_memory_cap_bytes", config.residual_memory_cap_bytes);
    check_one_of("logging.level", config.log_level, kLogLevels);
    check_one_of("logging.format", config.log_format, kLogFormats);
    return std::move(issues_);
  }

 private:
  void check_membership(const GatewayConfig& config) {
    const auto& nodes = config.nodes;
    if (nodes.empty() && config.size > 0) return check_controller_membership(config);
    if (nodes.empty()) {
      issue("job.nodes",
            "is missing or empty: list every gateway's host:port, by rank (or give job.size "
            "and control.url to take them from the controller)",
            {"job.nodes"});
      return;
    }
    if (config.size > 0) {
      issue("job.size", "give job.nodes or job.size, not both", {"job.nodes", "job.size"});
    }
    if (nodes.size() > kMaxJobNodes) {
      issue("job.nodes",
            "has " + std::to_string(nodes.size()) + " entries; a job has at most " +
                std::to_string(kMaxJobNodes) + " gateways",
            {"job.nodes"});
    }
    if (config.node_rank_auto) {
      issue("job.node_rank",
            "auto takes the rank from the controller: give job.size, not job.nodes",
            {"job.nodes", "job.node_rank"});
    }
    if (config.node_rank >= nodes.size()) {
      issue("job.node_rank",
            std::to_string(config.node_rank) + " is out of range: job.nodes has " +
                std::to_string(nodes.size()) + " entries",
            {"job.nodes", "job.node_rank"});
    }
    const std::string rank = std::to_string(config.node_rank);
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const std::string path = "job.nodes[" + std::to_string(i) + "]";
      if (nodes[i].host.empty()) {
        issue(path, "the host is empty", {"job.nodes"});
      } else if (i < config.node_rank && nodes[i].port == 0) {
        issue(path,
              "needs a port in 1..65535: rank " + rank + " dials the ranks below it, and port 0 " +
                  "is only allowed from job.node_rank up",
              {"job.nodes", "job.node_rank"});
      } else if (i < config.node_rank && nodes[i].host == "0.0.0.0") {
        issue(path, "0.0.0.0 cannot be dialled: rank " + rank + " dials the ranks below it",
              {"job.nodes", "job.node_rank"});
      }
    }
    if (config.listen.host.empty() && config.node_rank < nodes.size()) {
      issue("transport.listen", "is not set (by default it is job.nodes[job.node_rank])",
            {"transport.listen", "job.nodes", "job.node_rank"});
    }
  }

  void check_ingress(const GatewayConfig& config) {
    if (config.socket_path.empty()) {
      issue("ingress.socket", "must not be empty", {"ingress.socket"});
    } else if (config.socket_path.size() > kMaxSocketPathBytes) {
      issue("ingress.socket",
            "is " + std::to_string(config.socket_path.size()) +
                " bytes long; a Unix socket path holds at most " +
                std::to_string(kMaxSocketPathBytes),
            {"ingress.socket"});
    }
  }

  void check_compression(const GatewayConfig& config) {
    const auto params = kernels::parse_codec_spec(config.codec);
    if (!params.ok()) {
      issue("compression.codec", params.status().message(), {"compression.codec"});
      return;
    }
    if (config.collective != CollectiveMode::kRing) return;
    const auto codec = kernels::make_cpu_codec(*params);
    if (codec.ok() && !(*codec)->summable()) {
      issue("compression.collective",
            "ring needs a summable codec, and \"" + config.codec +
                "\" is not (use auto, allgather or aggregator)",
            {"compression.codec", "compression.collective"});
    }
    const uint64_t gateways = config.size > 0 ? config.size : config.nodes.size();
    if (codec.ok() && (*codec)->summable() && (*codec)->max_summands() < gateways) {
      issue("compression.collective",
            "ring sums a frame of each of the job's " + std::to_string(gateways) +
                " gateways, and \"" + config.codec + "\" sums at most " +
                std::to_string((*codec)->max_summands()) +
                " (raise its workers, or use auto, which decodes the frames one by one)",
            {"compression.codec", "compression.collective",
             config.size > 0 ? "job.size" : "job.nodes"});
    }
  }

  // Addresses from the controller: it must be known, and this gateway's own address (the one it
  // registers) must be one the others can dial.
  void check_controller_membership(const GatewayConfig& config) {
    check_node_name(config.node_name);
    if (config.node_rank >= config.size) {
      issue("job.node_rank",
            std::to_string(config.node_rank) + " is out of range: job.size is " +
                std::to_string(config.size),
            {"job.size", "job.node_rank"});
    }
    if (config.controller.host.empty()) {
      issue("job.size", "takes the gateways' addresses from the controller: set control.url",
            {"job.size", "control.url"});
    }
    if (!config.dpdk_from_network_status() &&
        (config.listen.host.empty() || config.listen.host == "0.0.0.0")) {
      issue("transport.listen",
            "with job.size, give the address the other gateways dial (not 0.0.0.0 or empty)",
            {"job.size", "transport.listen"});
    }
  }

  // The name a rank is claimed under, as the controller takes it ("" = the host name).
  void check_node_name(const std::string& name) {
    const bool valid_characters = std::all_of(name.begin(), name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    });
    if (name.size() > kMaxNodeNameBytes || !valid_characters) {
      issue("job.node_name",
            "\"" + name + "\" is not a node name: at most " + std::to_string(kMaxNodeNameBytes) +
                " characters of A-Z a-z 0-9 . _ -",
            {"job.node_name"});
    }
  }

  void check_control(const GatewayConfig& config) {
    check_positive("control.report_interval_ms", config.control_report_interval.count());
    const auto poll_wait = config.control_poll_wait.count();
    if (poll_wait < 1 || poll_wait > kMaxPolicyWaitMs) {
      // 0 would ask the controller again at once, thousands of times a second; the controller
      // refuses longer waits.
      issue("control.poll_wait_ms",
            "must be in 1.." + std::to_string(kMaxPolicyWaitMs) + ", got " +
                std::to_string(poll_wait),
            {"control.poll_wait_ms"});
    }
    const auto request_timeout = config.control_request_timeout.count();
    if (request_timeout < kMinRequestTimeoutMs || request_timeout > kMaxRequestTimeoutMs) {
      issue("control.request_timeout_ms",
            "must be in " + std::to_string(kMinRequestTimeoutMs) + ".." +
                std::to_string(kMaxRequestTimeoutMs) + ", got " + std::to_string(request_timeout),
            {"control.request_timeout_ms"});
    }
    if (!config.controller.host.empty() && config.controller.port == 0) {
      issue("control.url", "needs the controller's port (1..65535)", {"control.url"});
    }
  }

  void check_transport(const GatewayConfig& config) {
    check_positive("transport.connect_timeout_ms", config.connect_timeout.count());
    check_positive("transport.reconnect_min_ms", config.reconnect_min.count());
    if (config.reconnect_max < config.reconnect_min) {
      issue("transport.reconnect_max_ms",
            "must be >= reconnect_min_ms (" + std::to_string(config.reconnect_max.count()) + " < " +
                std::to_string(config.reconnect_min.count()) + ")",
            {"transport.reconnect_min_ms", "transport.reconnect_max_ms"});
    }
    // Below a second a lost segment's retransmission alone could outlast it and close a healthy
    // connection; keepalive probes go out every idle second anyway.
    if (config.peer_timeout.count() != 0 && config.peer_timeout < std::chrono::seconds(1)) {
      issue("transport.peer_timeout_ms",
            "must be 0 (the kernel's limits) or at least 1000, got " +
                std::to_string(config.peer_timeout.count()),
            {"transport.peer_timeout_ms"});
    }
    check_positive("transport.send_queue_bytes", config.send_queue_bytes);
    if (config.send_queue_bytes > kMaxSendQueueBytes) {
      issue("transport.send_queue_bytes",
            "must be <= " + std::to_string(kMaxSendQueueBytes) + " (1 TiB), got " +
                std::to_string(config.send_queue_bytes),
            {"transport.send_queue_bytes"});
    }
    check_positive("transport.max_message_bytes", config.max_message_bytes);
    if (config.max_message_bytes > kMaxPeerMessageBytes) {
      issue("transport.max_message_bytes",
            "must be <= " + std::to_string(kMaxPeerMessageBytes) + " (2^31 - 1)",
            {"transport.max_message_bytes"});
    }
  }

  // Every segment travels as one message: the largest message and the send queue must hold it
  // (frames denser than none's, top-k near density 1, need more than this floor).
  void check_segment_messages(const GatewayConfig& config) {
    if (config.segment_bytes > kMaxPeerMessageBytes - kSegmentMessageOverhead) {
      issue("collective.segment_bytes",
            "must be at most " + std::to_string(kMaxPeerMessageBytes - kSegmentMessageOverhead) +
                ": a segment travels as one message (at most 2^31 - 1 bytes)",
            {"collective.segment_bytes"});
      return;
    }
    const uint64_t message = config.segment_bytes + kSegmentMessageOverhead;
    for (const auto& [key, value] :
         {std::pair{"transport.max_message_bytes", config.max_message_bytes},
          std::pair{"transport.send_queue_bytes", config.send_queue_bytes}}) {
      if (value == 0 || value >= message) continue;
      issue(key,
            "must hold a segment's message: at least collective.segment_bytes + " +
                std::to_string(kSegmentMessageOverhead) + " = " + std::to_string(message) +
                ", got " + std::to_string(value),
            {key, "collective.segment_bytes"});
    }
  }

  void check_dpdk(const GatewayConfig& config) {
    if (!GRADGATE_HAVE_DPDK) {
      issue("job.transport",
            "dpdk: this gradgate was built without DPDK (no libdpdk at build time); use tcp or a "
            "build with DPDK (gradgate version lists the transports)",
            {"job.transport"});
      return;
    }
    check_network_status(config);
    const bool from_network_status = config.dpdk_from_network_status();
    if (config.size > 0) {  // it registers its DPDK address and dpdk.udp_port
      if (!from_network_status && !net::is_ipv4_address(config.listen.host)) {
        issue("transport.listen",
              "with dpdk and job.size, give this gateway's IPv4 address on its DPDK port, got \"" +
                  config.listen.host + "\"",
              {"job.transport", "job.size", "transport.listen"});
      }
      if (config.dpdk_udp_port == 0) {
        issue("dpdk.udp_port", "dpdk with job.size needs the UDP port of every gateway",
              {"job.transport", "job.size", "dpdk.udp_port"});
      }
    }
    for (std::size_t i = 0; i < config.nodes.size(); ++i) {
      const std::string& host = config.nodes[i].host;
      if (!net::is_ipv4_address(host)) {
        issue("job.nodes[" + std::to_string(i) + "]",
              "dpdk needs every gateway's IPv4 address, got \"" + host + "\"",
              {"job.transport", "job.nodes"});
      } else if (config.dpdk_udp_port == 0 && config.nodes[i].port == 0) {
        issue("job.nodes[" + std::to_string(i) + "]",
              "dpdk needs a UDP port here (or dpdk.udp_port for every gateway)",
              {"job.transport", "job.nodes", "dpdk.udp_port"});
      }
    }
    if (config.dpdk_port.empty() && !from_network_status) {
      issue("dpdk.port",
            "is not set: give a vdev (net_af_packet0,iface=eth1), a PCI address (0000:3b:00.0) or "
            "dpdk.network_status_file",
            {"dpdk.port", "dpdk.network_status_file"});
    }
    if (config.dpdk_mtu < kMinDpdkMtu || config.dpdk_mtu > kMaxDpdkMtu) {
      issue("dpdk.mtu",
            "must be in " + std::to_string(kMinDpdkMtu) + ".." + std::to_string(kMaxDpdkMtu) +
                ", got " + std::to_string(config.dpdk_mtu),
            {"dpdk.mtu"});
    }
    if (config.dpdk_mbufs < kMinDpdkMbufs) {
      issue("dpdk.mbufs", "must be at least " + std::to_string(kMinDpdkMbufs), {"dpdk.mbufs"});
    }
    check_positive("dpdk.memory_mb", config.dpdk_memory_mb);
    if (config.dpdk_cores.empty()) issue("dpdk.cores", "must not be empty", {"dpdk.cores"});
    if (config.dpdk_inject_drop + config.dpdk_inject_duplicate + config.dpdk_inject_reorder >=
        1.0) {
      issue("dpdk.inject_drop",
            "inject_drop + inject_duplicate + inject_reorder must be below 1 (they are fractions "
            "of the same datagrams)",
            {"dpdk.inject_drop", "dpdk.inject_duplicate", "dpdk.inject_reorder"});
    }
  }

  // dpdk.network_status_file and dpdk.network go together, and only with job.size: the address
  // they give is registered with the controller.
  void check_network_status(const GatewayConfig& config) {
    const bool file = !config.dpdk_network_status_file.empty();
    if (file != !config.dpdk_network.empty()) {
      issue(file ? "dpdk.network" : "dpdk.network_status_file",
            "dpdk.network_status_file and dpdk.network are set together or not at all",
            {"dpdk.network_status_file", "dpdk.network"});
      return;
    }
    if (!file) return;
    if (config.size == 0) {
      issue("dpdk.network_status_file",
            "needs job.size (the address it gives is registered with the controller), not "
            "job.nodes",
            {"dpdk.network_status_file", "job.size"});
    }
    check_positive("dpdk.network_wait_ms", config.dpdk_network_wait.count());
  }

  template <typename Number>
  void check_positive(std::string_view key, Number value) {
    if (!(value > 0)) issue(std::string(key), "must be > 0", {key});
  }

  template <std::size_t N>
  void check_one_of(std::string_view key, const std::string& value,
                    const std::array<std::string_view, N>& allowed) {
    if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return;
    std::string list;
    for (const auto name : allowed) list += (list.empty() ? "" : ", ") + std::string(name);
    issue(std::string(key), "\"" + value + "\" is not one of " + list, {key});
  }

  void issue(std::string key_path, std::string message, std::vector<std::string_view> inputs) {
    issues_.push_back({std::move(key_path), std::move(message), std::move(inputs)});
  }

  std::vector<ConfigIssue> issues_;
};

}  // namespace

std::vector<ConfigIssue> check_gateway_config(const GatewayConfig& config) {
  return Checker().run(config);
}

std::vector<std::string> validate_gateway_config(const GatewayConfig& config) {
  std::vector<std::string> problems;
  for (const auto& issue : check_gateway_config(config)) {
    problems.push_back(issue.key_path + ": " + issue.message);
  }
  return problems;
}

}  // namespace gradgate::gateway
