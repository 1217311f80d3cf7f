// Two network namespaces joined by a veth pair, for `gradgate bench allreduce --link veth`: a
// link through the kernel's network stack between gateways on one machine, on which both the TCP
// transport (the kernel's addresses 10.199.0.1 and 10.199.0.2 /24) and the DPDK one (a
// net_af_packet port on each end) run. Optionally rate-limited like a real link: a token bucket
// (`tc tbf`) on each end's egress. Needs root and `ip` (and `tc` for a rate). Names carry this
// process's id, so that runs side by side never collide; the destructor removes both namespaces,
// and with them the pair. Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "temp_dir.h"

namespace gradgate::bench {

class VethPair {
 public:
  /// Creates the namespaces and the pair, addressed and up, each direction limited to `rate_mbit`
  /// megabits per second (0: no limit). Throws std::runtime_error with the failed command's
  /// output, having removed what it created.
  explicit VethPair(uint64_t rate_mbit = 0);
  ~VethPair();
  VethPair(const VethPair&) = delete;
  VethPair& operator=(const VethPair&) = delete;

  /// Why a pair cannot be made here (not root, no `ip`); "" if it can.
  static std::string unavailable();

  /// End 0 or 1: its namespace, its device, its kernel address (without the prefix length).
  const std::string& netns(int end) const { return netns_[end]; }
  const std::string& device(int end) const { return devices_[end]; }
  const std::string& address(int end) const { return addresses_[end]; }

 private:
  void ip(const std::vector<std::string>& args) const { run(ip_program_, args); }
  void run(const std::string& program, const std::vector<std::string>& args) const;
  void limit_rate(int end, uint64_t rate_mbit) const;
  void remove();

  std::string ip_program_;
  TempDir dir_;  // logs of the ip commands
  std::vector<std::string> netns_, devices_, addresses_;
  std::vector<std::string> created_;  // namespaces to remove
};

}  // namespace gradgate::bench
