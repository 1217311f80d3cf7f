#include "local_job.h"

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

namespace gradgate::bench {
namespace {

std::string per_rank(const std::vector<std::string>& values, uint32_t rank,
                     const std::string& fallback) {
  return rank < values.size() && !values[rank].empty() ? values[rank] : fallback;
}

}  // namespace

LocalJob::LocalJob(LocalJobOptions options)
    : options_(std::move(options)),
      dir_("gradgate-job"),
      ports_(options_.nodes, options_.transport == "dpdk" ? options_.dpdk_udp_port : 0),
      dial_ports_(options_.nodes, 0),
      admin_ports_(options_.nodes, 0),
      ranks_(options_.nodes, 0) {
  gateways_.resize(options_.nodes);
  const uint32_t started = std::min(options_.nodes, options_.started);
  if (options_.membership_from_controller) {
    for (uint32_t rank = 0; rank < started; ++rank) launch_gateway(rank);
    for (uint32_t rank = 0; rank < started; ++rank) await_gateway(rank);
    return;
  }
  for (uint32_t rank = 0; rank < started; ++rank) start_gateway(rank);
}

LocalJob::~LocalJob() {
  for (auto& gateway : gateways_) {
    if (gateway) gateway->signal(SIGTERM);
  }
  for (auto& gateway : gateways_) {
    if (gateway) gateway->wait_exit(std::chrono::seconds(10));
  }
}

std::string LocalJob::socket(uint32_t rank) const {
  return dir_.path() + "/gateway" + std::to_string(rank) + ".sock";
}

std::string LocalJob::write_config(uint32_t rank) const {
  const std::string path = dir_.path() + "/gateway" + std::to_string(rank) + ".yaml";
  std::ofstream out(path, std::ios::trunc);
  out << "job:\n  id: 77\n  local_workers: " << options_.local_workers << "\n";
  if (options_.transport != "tcp") out << "  transport: " << options_.transport << "\n";
  if (options_.ranks_from_controller) {
    out << "  node_rank: auto\n  node_name: node-" << rank << "\n";
  } else {
    out << "  node_rank: " << rank << "\n";
  }
  if (options_.membership_from_controller) {
    out << "  size: " << options_.nodes << "\n";
  } else {
    out << "  nodes:\n";
    for (uint32_t peer = 0; peer < options_.nodes; ++peer) {
      const bool proxied = peer < rank && dial_ports_[peer] != 0;
      out << "    - \"" << per_rank(options_.addresses, peer, "127.0.0.1") << ":"
          << (proxied ? dial_ports_[peer] : ports_[peer]) << "\"\n";
    }
  }
  out << "ingress:\n  socket: " << socket(rank) << "\n"
      << "compression:\n  codec: \"" << options_.codec
      << "\"\n  collective: " << options_.collective
      << "\n  min_compress_elements: " << options_.min_compress_elements << "\n"
      << "transport:\n  reconnect_min_ms: 10\n  reconnect_max_ms: 200\n"
      << (options_.membership_from_controller ? "  listen: \"127.0.0.1:0\"\n" : "")
      << "collective:\n  timeout_ms: " << options_.timeout_ms << "\n"
      << "streams:\n  residual_memory_cap_bytes: " << options_.residual_memory_cap_bytes << "\n"
      << "control:\n  url: \"" << options_.control_url
      << "\"\n  report_interval_ms: " << options_.report_interval_ms << "\n"
      << "logging:\n  level: " << options_.log_level << "\n";
  if (options_.transport == "dpdk") {
    out << "dpdk:\n  port: \"" << per_rank(options_.dpdk_ports, rank, "") << "\"\n  cores: \""
        << rank % std::max(1u, std::thread::hardware_concurrency())
        << "\"\n  no_huge: true\n  memory_mb: 512\n  eal_args: [\"--log-level=warning\"]\n"
        << "  idle_sleep_us: " << options_.dpdk_idle_sleep_us << "\n";
  }
  return path;
}

std::string LocalJob::ready_file(uint32_t rank) const {
  return dir_.path() + "/gateway" + std::to_string(rank) + ".ready";
}

void LocalJob::launch_gateway(uint32_t rank) {
  std::filesystem::remove(ready_file(rank));
  std::string program = options_.program;
  std::vector<std::string> args;
  const std::string netns = per_rank(options_.netns, rank, "");
  if (!netns.empty()) {
    // `ip netns exec` becomes the program: the child is the gateway itself.
    args = {"netns", "exec", netns, program};
    program = find_program("ip");
    if (program.empty()) throw std::runtime_error("no ip command to enter netns " + netns);
  }
  args.insert(args.end(), {"gateway", "-c", write_config(rank), "--ready-file", ready_file(rank),
                           "--stats-interval", "0"});
  for (const auto& setting : options_.settings) args.insert(args.end(), {"--set", setting});
  gateways_[rank] = std::make_unique<ChildProcess>(
      program, args, dir_.path() + "/gateway" + std::to_string(rank) + ".log");
}

void LocalJob::await_gateway(uint32_t rank) {
  const auto json = wait_for_ready_file(ready_file(rank), *gateways_[rank]);
  ports_[rank] = json.at("port").get<uint16_t>();
  admin_ports_[rank] = json.at("admin_port").get<uint16_t>();
  ranks_[rank] = json.at("rank").get<uint32_t>();
}

void LocalJob::start_gateway(uint32_t rank) {
  launch_gateway(rank);
  await_gateway(rank);
}

int LocalJob::stop_gateway(uint32_t rank) {
  gateways_[rank]->signal(SIGTERM);
  return gateways_[rank]->wait_exit(std::chrono::seconds(20));
}

}  // namespace gradgate::bench
