#include "veth_pair.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <stdexcept>

#include "child_process.h"

namespace gradgate::bench {

VethPair::VethPair(uint64_t rate_mbit) : ip_program_(find_program("ip")), dir_("gradgate-veth") {
  const std::string why = unavailable();
  if (!why.empty()) throw std::runtime_error(why);
  const std::string tag = std::to_string(::getpid());
  for (const char* end : {"a", "b"}) {
    netns_.push_back("gg-bench-" + tag + end);
    devices_.push_back("ggb" + tag + end);  // at most 15 characters
  }
  addresses_ = {"10.199.0.1", "10.199.0.2"};
  try {
    for (const std::string& netns : netns_) {
      ip({"netns", "add", netns});
      created_.push_back(netns);
      ip({"-n", netns, "link", "set", "lo", "up"});
    }
    ip({"link", "add", devices_[0], "netns", netns_[0], "type", "veth", "peer", "name", devices_[1],
        "netns", netns_[1]});
    for (int end = 0; end < 2; ++end) {
      ip({"-n", netns_[end], "addr", "add", addresses_[end] + "/24", "dev", devices_[end]});
      ip({"-n", netns_[end], "link", "set", devices_[end], "up"});
      if (rate_mbit > 0) limit_rate(end, rate_mbit);
    }
  } catch (...) {
    remove();
    throw;
  }
}

VethPair::~VethPair() { remove(); }

std::string VethPair::unavailable() {
  if (::geteuid() != 0) return "a veth pair needs root (network namespaces)";
  if (find_program("ip").empty()) return "a veth pair needs the ip command (iproute2)";
  return "";
}

void VethPair::limit_rate(int end, uint64_t rate_mbit) const {
  const std::string tc = find_program("tc");
  if (tc.empty()) throw std::runtime_error("a rate-limited veth pair needs the tc command");
  // A burst of 1 ms at the rate (at least 64 KiB, one TSO segment), queueing up to 50 ms.
  const uint64_t burst = std::max<uint64_t>(rate_mbit * 1000 / 8, 64 << 10);
  run(ip_program_, {"netns", "exec", netns_[end], tc, "qdisc", "add", "dev", devices_[end], "root",
                    "tbf", "rate", std::to_string(rate_mbit) + "mbit", "burst",
                    std::to_string(burst), "latency", "50ms"});
}

void VethPair::run(const std::string& program, const std::vector<std::string>& args) const {
  const std::string log = dir_.path() + "/command.log";
  std::filesystem::remove(log);
  ChildProcess process(program, args, log);
  const int code = process.wait_exit(std::chrono::seconds(10));
  if (code != 0) {
    std::string command = program;
    for (const std::string& arg : args) command += " " + arg;
    throw std::runtime_error(
        command + ": " + (code < 0 ? "no exit within 10 s" : "exit code " + std::to_string(code)) +
        "\n" + process.log());
  }
}

void VethPair::remove() {
  // Deleting a namespace deletes the veth end in it, and so the pair.
  for (const std::string& netns : created_) {
    try {
      ip({"netns", "del", netns});
    } catch (const std::exception&) {
      // Best effort: a destructor cannot report it, and the other namespace still goes.
    }
  }
  created_.clear();
}

}  // namespace gradgate::bench
