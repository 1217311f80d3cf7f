// Test helpers around a local job of gateway processes (bench/local_job.h): worker processes
// running gradgate_test_worker, and reading what they wrote.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "local_job.h"

namespace gradgate::gateway::testing {

using bench::ChildProcess;

struct TensorArg {
  std::string name;
  uint64_t elements = 0;
  std::string dtype = "fp32";
  std::string text() const { return name + ":" + std::to_string(elements) + ":" + dtype; }
};

/// A job of `nodes` gateways of this build's gradgate binary.
bench::LocalJobOptions job_options(uint32_t nodes, uint32_t local_workers, std::string codec,
                                   std::string collective = "auto", uint32_t timeout_ms = 20000);

/// Starts gradgate_test_worker as local worker `local_rank` of gateway `rank`; it writes the
/// results of every step to `output` (fp32, tensor after tensor; not when `extra` has its own
/// --out) and logs to output + ".log". `extra` may also set its own --timeout-ms.
std::unique_ptr<ChildProcess> start_worker(const bench::LocalJob& job, uint32_t rank,
                                           uint32_t local_rank,
                                           const std::vector<TensorArg>& tensors, int steps,
                                           uint64_t seed, const std::string& output,
                                           const std::vector<std::string>& extra = {});

/// Waits up to `timeout` for `text` to appear in the process's log.
bool wait_for_log(const ChildProcess& process, const std::string& text,
                  std::chrono::milliseconds timeout);

/// The fp32 values a worker wrote, all steps after each other.
std::vector<float> read_floats(const std::string& path);

/// The value of the sample `series` (a name and its labels, `name{label="value"}`) in a
/// Prometheus text exposition; -1 if it is not there.
double sample(const std::string& exposition, const std::string& series);

/// GET `target` of the HTTP server on 127.0.0.1:`port`: the body of a 200, else "".
std::string get_body(uint16_t port, const std::string& target);

}  // namespace gradgate::gateway::testing
