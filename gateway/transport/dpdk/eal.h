// DPDK's Environment Abstraction Layer, set up once per process from the gateway's options.
//
// rte_eal_init() may run only once in a process and cannot be undone in a way that allows a
// second init, so init_eal() is a process-wide latch: the first call initialises the EAL with its
// options, later calls return what the first returned (their options are ignored; every DPDK
// transport of a process shares the one EAL). Thread-safe. The EAL runs without shared files
// (--no-shconf: no secondary processes), and its empty runtime directory is removed at exit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gradgate/base/status.h"

namespace gradgate::gateway::dpdk {

struct EalOptions {
  std::string cores = "0";         // -l: the lcores DPDK may use (the polling thread is ours)
  uint32_t memory_mb = 256;        // -m
  bool no_huge = false;            // --no-huge: ordinary pages (tests, af_packet; slower)
  bool no_pci = false;             // --no-pci: virtual devices only
  std::string file_prefix;         // --file-prefix: "" = "gg<pid>", so that processes never collide
  std::vector<std::string> vdevs;  // --vdev, one each
  std::vector<std::string> extra_args;  // appended as given
};

/// The argument vector init_eal() passes to rte_eal_init (program name first).
std::vector<std::string> eal_arguments(const EalOptions& options);

/// Initialises the EAL once per process. kUnavailable with DPDK's reason when it fails. The
/// calling thread keeps its CPU affinity (rte_eal_init would bind it, and every thread the
/// gateway starts later, to the main lcore).
Status init_eal(const EalOptions& options);

/// Binds the calling thread to the CPUs of the EAL's main lcore (the first of `cores`): the
/// polling thread runs there, everything else where the scheduler puts it. No-op before init.
void bind_to_main_lcore();

}  // namespace gradgate::gateway::dpdk
