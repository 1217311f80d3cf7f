// `gradgate bench allreduce`: the time of an all-reduce through real gateway processes (workers
// in this process using the C API, the gateways' transport, the codec), over a sweep of sizes and
// codecs, with the CPU time the gateways spent on it. On loopback (TCP) against two references of
// the same size measured in the same run: a plain TCP ring all-reduce (tcp_ring_reference.h) and
// torch.distributed's gloo all-reduce (gloo_reference.h; unavailable, with the reason, where torch
// cannot run). On a veth pair between two network namespaces (veth_pair.h) each listed transport
// (TCP, DPDK on net_af_packet) in turn, against the first one listed (or, on a rate-limited pair,
// the first one against the time an uncompressed ring all-reduce needs at the link's rate).
// Reports seconds, bus bandwidth, wire bytes and the ratio to each reference.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace gradgate::bench {

struct AllreduceBenchOptions {
  std::string program;  // the gradgate binary that runs the gateways
  std::vector<uint64_t> sizes = {1ull << 20, 4ull << 20, 16ull << 20, 64ull << 20, 256ull << 20};
  std::vector<std::string> codecs = {"none", "fp16", "topk:density=0.01"};
  std::vector<uint32_t> gateways;  // empty: 2 and 4 on loopback, 2 on a veth pair (its only size)
  /// Transports between the gateways: "tcp", "dpdk". On a veth pair the first is the reference.
  std::vector<std::string> transports = {"tcp"};
  /// "loopback" (TCP only), "veth" (needs root and ip) or "auto": veth when dpdk is listed.
  std::string link = "auto";
  /// On a veth pair: each direction limited to this many Mbit/s (tc tbf), like a real link; the
  /// first transport is then timed against an uncompressed ring all-reduce at exactly that rate.
  uint64_t link_mbit = 0;
  uint32_t dpdk_idle_sleep_us = 0;  // the DPDK gateways' dpdk.idle_sleep_us
  /// More gateway settings, "section.key=value" (e.g. collective.segment_bytes=0).
  std::vector<std::string> gateway_settings;
  /// On loopback: the Python (with torch) that runs the gloo reference, and its script; "" for
  /// either: no gloo reference.
  std::string python = "/usr/bin/python3";
  std::string gloo_script;
  int warmup = 1;
  double min_seconds = 1.0;  // per measurement, at least 3 and at most 50 repetitions
  bool json = false;
};

/// The defaults, with the source tree's bench/gloo_allreduce.py as the gloo script.
AllreduceBenchOptions default_allreduce_bench_options();

/// Runs the sweep; false (with the reason on `err`) if the options do not fit together, the link
/// cannot be made, or a gateway or a call fails.
bool run_allreduce_bench(const AllreduceBenchOptions& options, std::ostream& out,
                         std::ostream& err);

}  // namespace gradgate::bench
