#include "node_bench.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "bench_workers.h"
#include "local_job.h"

namespace gradgate::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Row {
  uint32_t local_workers = 0, tensors = 0;
  uint64_t bytes = 0;  // per tensor
  double seconds = 0.0, copy_seconds = 0.0;
  double gateway_cpu_seconds = 0.0;  // per round
};

void print(const Row& row, bool json, std::ostream& out) {
  const double handed_over = static_cast<double>(row.bytes) * row.local_workers * row.tensors;
  const double vs_copy = row.copy_seconds / row.seconds;
  const double node_gbps = handed_over / row.seconds / 1e9;
  if (json) {
    out << nlohmann::json{{"bench", "node"},
                          {"local_workers", row.local_workers},
                          {"tensors", row.tensors},
                          {"bytes", row.bytes},
                          {"seconds", row.seconds},
                          {"copy_seconds", row.copy_seconds},
                          {"vs_copy", vs_copy},
                          {"node_gbps", node_gbps},
                          {"gateway_cpu_seconds", row.gateway_cpu_seconds}}
               .dump()
        << "\n";
    return;
  }
  out << std::setw(8) << row.local_workers << std::setw(8) << row.tensors << std::setw(9)
      << row.bytes / (1 << 20) << std::fixed << std::setprecision(4) << std::setw(10) << row.seconds
      << std::setw(10) << row.copy_seconds << std::setprecision(2) << std::setw(9) << vs_copy
      << std::setw(10) << node_gbps << std::setprecision(4) << std::setw(10)
      << row.gateway_cpu_seconds << "\n";
}

// Every worker's buffer of every tensor holds the sum of the workers' inputs (the last round's
// result); throws otherwise, since a timing of wrong results is no timing.
void check_sums(const std::vector<std::vector<gg_tensor*>>& tensors,
                const std::vector<std::vector<float>>& inputs) {
  for (size_t i = 0; i < inputs[0].size(); ++i) {
    float sum = 0.0f, magnitude = 0.0f;
    for (const auto& input : inputs) {
      sum += input[i];
      magnitude += std::fabs(input[i]);
    }
    for (const auto& tensor : tensors) {
      for (gg_tensor* each : tensor) {
        const float got = static_cast<const float*>(gg_tensor_data(each))[i];
        if (!(std::fabs(got - sum) <= 1e-5f * magnitude)) {
          throw std::runtime_error("element " + std::to_string(i) + " is " + std::to_string(got) +
                                   " after the all-reduce, not the sum " + std::to_string(sum));
        }
      }
    }
  }
}

// One row: every worker all-reduces `tensors` tensors of `bytes` at once, round after round.
Row measure(const NodeBenchOptions& options, LocalJob& job, Workers& workers, const Row& base) {
  Row row = base;
  const size_t elements = row.bytes / sizeof(float);
  std::vector<std::vector<gg_tensor*>> tensors;  // by tensor, then worker
  for (uint32_t t = 0; t < row.tensors; ++t) {
    tensors.push_back(
        workers.declare("node." + std::to_string(row.bytes) + "." + std::to_string(t), elements));
  }
  std::vector<std::vector<float>> inputs;  // by worker
  for (size_t worker = 0; worker < workers.size(); ++worker) {
    inputs.push_back(random_gradient(elements, static_cast<uint32_t>(worker + 1)));
  }
  auto round = [&] {
    for (const auto& tensor : tensors) {  // the gradients, not the sums of the last round
      for (size_t worker = 0; worker < workers.size(); ++worker) {
        std::memcpy(gg_tensor_data(tensor[worker]), inputs[worker].data(), row.bytes);
      }
    }
    std::vector<gg_request*> requests;
    const auto start = Clock::now();
    for (const auto& tensor : tensors) {
      for (gg_tensor* each : tensor) {
        check(gg_allreduce(each, &requests.emplace_back()), "gg_allreduce");
      }
    }
    for (gg_request* request : requests) check(gg_wait(request, 300000, nullptr), "gg_wait");
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  std::vector<std::byte> scratch(row.bytes);
  auto copy = [&] {
    const auto start = Clock::now();
    for (const auto& tensor : tensors) {
      for (gg_tensor* each : tensor) std::memcpy(scratch.data(), gg_tensor_data(each), row.bytes);
    }
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  // Interleaved, so that both see the same state of a noisy machine.
  row.copy_seconds = median_seconds(copy, options.warmup, options.min_seconds);
  for (int i = 0; i < options.warmup; ++i) round();
  const double cpu_before = job.gateway(0).cpu_seconds();
  int rounds = 0;
  row.seconds = median_seconds(
      [&] {
        ++rounds;
        return round();
      },
      0, options.min_seconds);
  row.gateway_cpu_seconds = (job.gateway(0).cpu_seconds() - cpu_before) / rounds;
  check_sums(tensors, inputs);
  return row;
}

}  // namespace

bool run_node_bench(const NodeBenchOptions& options, std::ostream& out, std::ostream& err) {
  if (!options.json) {
    out << "workers tensors  size_MB   seconds  copy_s  vs_copy  node_GB/s  gw_cpu_s\n";
  }
  try {
    for (uint32_t local_workers : options.local_workers) {
      LocalJobOptions job_options;
      job_options.program = options.program;
      job_options.nodes = 1;
      job_options.local_workers = local_workers;
      job_options.timeout_ms = 120000;
      job_options.log_level = "warn";
      job_options.residual_memory_cap_bytes = uint64_t{64} << 30;
      LocalJob job(job_options);
      Workers workers(job);
      for (uint64_t bytes : options.sizes) {
        print(measure(options, job, workers, {local_workers, options.tensors, bytes}), options.json,
              out);
        out.flush();
      }
    }
  } catch (const std::exception& error) {
    err << "gradgate bench node: " << error.what() << "\n";
    return false;
  }
  return true;
}

}  // namespace gradgate::bench
