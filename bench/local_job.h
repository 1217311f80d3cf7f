// A job of real gateway processes on this machine, for the all-reduce benchmark, the tests and the
// demo's C++ users: a temporary directory with one config per gateway, gateways started in rank
// order on port 0 (a gateway dials the lower ranks, so each learns their ports from their ready
// files), stopped with SIGTERM when the job goes away. By default on loopback over TCP; a gateway
// may run in its own network namespace (`ip netns exec`, e.g. on an end of a VethPair) and the
// job may use the DPDK transport (fixed UDP ports, one DPDK port per gateway).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "child_process.h"
#include "temp_dir.h"

namespace gradgate::bench {

struct LocalJobOptions {
  std::string program;  // the gradgate binary
  uint32_t nodes = 2;
  uint32_t local_workers = 1;
  std::string codec = "none";
  std::string collective = "auto";
  uint32_t timeout_ms = 20000;
  uint64_t min_compress_elements = 1024;
  uint64_t residual_memory_cap_bytes = uint64_t{8} << 30;
  std::string log_level = "info";
  /// The controller (host:port) the gateways report to; "" for none.
  std::string control_url;
  /// Gateways take each other's addresses from the controller (job.size) instead of their config;
  /// they are all started together, since none is ready before every one registered.
  bool membership_from_controller = false;
  /// With membership_from_controller: `job.node_rank: auto`, gateway i named "node-i"; the
  /// controller assigns the ranks (rank_of tells which).
  bool ranks_from_controller = false;
  uint32_t report_interval_ms = 1000;
  /// Gateways started by the constructor (ranks 0..n-1); the others wait for start_gateway().
  uint32_t started = ~0u;
  /// Per rank: the network namespace gateway `rank` runs in; missing or "": this process's.
  std::vector<std::string> netns;
  /// Per rank: the address of gateway `rank` in job.nodes (with DPDK, its port's own address, not
  /// the kernel's); missing: 127.0.0.1.
  std::vector<std::string> addresses;
  /// job.transport: "tcp" or "dpdk".
  std::string transport = "tcp";
  /// With dpdk, per rank: `dpdk.port` (e.g. "net_af_packet0,iface=veth0"), on ordinary pages, the
  /// EAL on core rank % cores; every gateway listens on `dpdk_udp_port`.
  std::vector<std::string> dpdk_ports;
  uint16_t dpdk_udp_port = 4791;
  uint32_t dpdk_idle_sleep_us = 0;  // dpdk.idle_sleep_us
  /// More settings for every gateway, "section.key=value" (the gateway's --set).
  std::vector<std::string> settings;
};

class LocalJob {
 public:
  /// Starts the gateways; throws std::runtime_error (with the gateway's log) if one fails.
  explicit LocalJob(LocalJobOptions options);
  ~LocalJob();
  LocalJob(const LocalJob&) = delete;
  LocalJob& operator=(const LocalJob&) = delete;

  const LocalJobOptions& options() const { return options_; }
  const std::string& dir() const { return dir_.path(); }
  ChildProcess& gateway(uint32_t rank) { return *gateways_[rank]; }
  uint16_t port(uint32_t rank) const { return ports_[rank]; }
  /// Where gateway `rank` serves its admin HTTP API (/metrics, /v1/status).
  uint16_t admin_port(uint32_t rank) const { return admin_ports_[rank]; }
  std::string socket(uint32_t rank) const;
  /// The rank gateway `index` runs as (its own index unless ranks_from_controller).
  uint32_t rank_of(uint32_t index) const { return ranks_[index]; }

  /// (Re)starts gateway `rank` on its known port (port 0 the first time); waits until ready.
  void start_gateway(uint32_t rank);
  /// start_gateway in two halves: starts the process, then waits until it is ready (a gateway
  /// that takes its peers from the controller is ready once all of them registered).
  void launch_gateway(uint32_t rank);
  void await_gateway(uint32_t rank);
  /// Stops gateway `rank` with SIGTERM and returns its exit code.
  int stop_gateway(uint32_t rank);
  /// Gateways started from now on dial gateway `rank` at `port` on 127.0.0.1 (a proxy in front
  /// of it) instead of its own port.
  void dial_through(uint32_t rank, uint16_t port) { dial_ports_[rank] = port; }

 private:
  std::string write_config(uint32_t rank) const;
  std::string ready_file(uint32_t rank) const;

  LocalJobOptions options_;
  TempDir dir_;  // removed after the gateways stopped: they are destroyed first
  std::vector<std::unique_ptr<ChildProcess>> gateways_;
  std::vector<uint16_t> ports_;
  std::vector<uint16_t> dial_ports_;  // by rank: where higher ranks dial it (0: its own port)
  std::vector<uint16_t> admin_ports_;
  std::vector<uint32_t> ranks_;
};

}  // namespace gradgate::bench
