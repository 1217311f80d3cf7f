#include "gateway/transport/dpdk/eal.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <mutex>
#include <optional>

#include <rte_eal.h>
#include <rte_errno.h>
#include <spdlog/spdlog.h>

namespace gradgate::gateway::dpdk {
namespace {

// The EAL makes its runtime directory even with --no-shconf, and leaves it behind (empty).
std::string runtime_directory;

void remove_runtime_directory() { ::rmdir(runtime_directory.c_str()); }

// The CPUs rte_eal_init bound its calling thread to (the main lcore's); empty before it ran.
cpu_set_t lcore_cpus;

}  // namespace

std::vector<std::string> eal_arguments(const EalOptions& options) {
  std::vector<std::string> args = {"gradgate", "-l", options.cores, "-m",
                                   std::to_string(options.memory_mb)};
  if (options.no_huge) args.push_back("--no-huge");
  if (options.no_pci) args.push_back("--no-pci");
  args.push_back("--no-shconf");     // one primary process: no shared files for secondaries
  args.push_back("--no-telemetry");  // the gateway exports its own metrics
  args.push_back("--file-prefix");
  args.push_back(options.file_prefix.empty() ? "gg" + std::to_string(::getpid())
                                             : options.file_prefix);
  for (const std::string& vdev : options.vdevs) {
    args.push_back("--vdev");
    args.push_back(vdev);
  }
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  return args;
}

Status init_eal(const EalOptions& options) {
  static std::mutex mutex;
  static std::optional<Status> result;
  std::lock_guard lock(mutex);
  if (result) return *result;
  std::vector<std::string> args = eal_arguments(options);
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  // rte_eal_init binds the calling thread to the main lcore, and every thread it starts later
  // would inherit that: the caller gets its own CPUs back, the polling thread asks for the lcore.
  cpu_set_t caller_cpus;
  CPU_ZERO(&caller_cpus);
  const bool known = pthread_getaffinity_np(pthread_self(), sizeof caller_cpus, &caller_cpus) == 0;
  const int initialised = rte_eal_init(static_cast<int>(args.size()), argv.data());
  pthread_getaffinity_np(pthread_self(), sizeof lcore_cpus, &lcore_cpus);
  if (known) pthread_setaffinity_np(pthread_self(), sizeof caller_cpus, &caller_cpus);
  if (initialised < 0) {
    result = Status(ErrorCode::kUnavailable,
                    std::string("dpdk: EAL initialisation failed: ") + rte_strerror(rte_errno));
  } else {
    result = Status();
    runtime_directory = rte_eal_get_runtime_dir();
    std::atexit(remove_runtime_directory);
    spdlog::info("dpdk: EAL up on lcores {} with {} MB{}", options.cores, options.memory_mb,
                 options.no_huge ? " (no huge pages)" : "");
  }
  return *result;
}

void bind_to_main_lcore() {
  if (CPU_COUNT(&lcore_cpus) > 0)
    pthread_setaffinity_np(pthread_self(), sizeof lcore_cpus, &lcore_cpus);
}

}  // namespace gradgate::gateway::dpdk
