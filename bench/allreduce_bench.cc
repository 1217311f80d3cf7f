#include "allreduce_bench.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <iomanip>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

#include "gradgate/client.h"
#include "local_job.h"
#include "tcp_ring_reference.h"

namespace gradgate::bench {
namespace {

using Clock = std::chrono::steady_clock;

void check(gg_status status, const char* what) {
  if (status != GG_OK) {
    throw std::runtime_error(std::string(what) + ": " + gg_status_name(status) + ": " +
                             gg_last_error());
  }
}

// Median seconds of `run` (which returns its own seconds), after `warmup` untimed runs, repeated
// for at least `min_seconds` in all, 3 to 50 times.
double median_seconds(const std::function<double()>& run, int warmup, double min_seconds) {
  for (int i = 0; i < warmup; ++i) run();
  std::vector<double> times;
  double total = 0.0;
  while (times.size() < 50 && (times.size() < 3 || total < min_seconds)) {
    times.push_back(run());
    total += times.back();
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

// The job's workers: one C-API client per gateway, in this process.
class Workers {
 public:
  explicit Workers(const LocalJob& job) {
    for (uint32_t rank = 0; rank < job.options().nodes; ++rank) {
      gg_client* client = nullptr;
      check(gg_connect(job.socket(rank).c_str(), 0, &client), "gg_connect");
      clients_.push_back(client);
    }
  }
  ~Workers() {
    for (gg_client* client : clients_) gg_close(client);
  }
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;

  // Declares one tensor of `elements` on every worker.
  std::vector<gg_tensor*> declare(const std::string& name, size_t elements) {
    std::vector<gg_tensor*> tensors;
    for (gg_client* client : clients_) {
      gg_tensor* tensor = nullptr;
      check(gg_declare(client, name.c_str(), elements, GG_FP32, 0, 0, 0.0, &tensor), "gg_declare");
      tensors.push_back(tensor);
    }
    return tensors;
  }

 private:
  std::vector<gg_client*> clients_;
};

struct Row {
  uint32_t gateways;
  std::string codec;
  uint64_t bytes;
  double seconds, reference_seconds;
  double wire_bytes;  // per gateway and all-reduce
  // Per gateway and all-reduce, as the gateways report them.
  double encode_seconds = 0.0, communicate_seconds = 0.0, decode_seconds = 0.0;
};

void print(const Row& row, bool json, std::ostream& out) {
  const double ratio = row.seconds / row.reference_seconds;
  const double algbw = static_cast<double>(row.bytes) / row.seconds / 1e9;
  if (json) {
    out << nlohmann::json{{"gateways", row.gateways},
                          {"codec", row.codec},
                          {"bytes", row.bytes},
                          {"seconds", row.seconds},
                          {"reference_seconds", row.reference_seconds},
                          {"vs_reference", ratio},
                          {"algbw_gbps", algbw},
                          {"wire_bytes", row.wire_bytes},
                          {"wire_ratio", row.wire_bytes / static_cast<double>(row.bytes)},
                          {"encode_seconds", row.encode_seconds},
                          {"communicate_seconds", row.communicate_seconds},
                          {"decode_seconds", row.decode_seconds}}
               .dump()
        << "\n";
    return;
  }
  out << std::setw(8) << row.gateways << std::setw(22) << row.codec << std::setw(10)
      << row.bytes / (1 << 20) << std::fixed << std::setprecision(4) << std::setw(11) << row.seconds
      << std::setw(11) << row.reference_seconds << std::setprecision(2) << std::setw(10) << ratio
      << std::setw(9) << algbw << std::setprecision(4) << std::setw(11)
      << row.wire_bytes / static_cast<double>(row.bytes) << "\n";
}

std::vector<float> random_gradient(size_t elements, uint32_t seed) {
  std::mt19937 random(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(elements);
  for (auto& value : values) value = normal(random);
  return values;
}

void bench_codec(const AllreduceBenchOptions& options, uint32_t gateways, const std::string& codec,
                 TcpRingReference& reference, std::ostream& out) {
  LocalJobOptions job_options;
  job_options.program = options.program;
  job_options.nodes = gateways;
  job_options.codec = codec;
  job_options.timeout_ms = 120000;
  job_options.log_level = "warn";
  LocalJob job(job_options);
  Workers workers(job);
  for (uint64_t bytes : options.sizes) {
    const size_t elements = bytes / sizeof(float);
    std::vector<std::vector<float>> inputs;
    for (uint32_t rank = 0; rank < gateways; ++rank) {
      inputs.push_back(random_gradient(elements, rank + 1));
    }
    auto tensors = workers.declare("bench." + std::to_string(bytes), elements);
    gg_allreduce_info total{};
    uint64_t calls = 0;
    auto through_gateways = [&] {
      for (uint32_t rank = 0; rank < gateways; ++rank) {
        std::memcpy(gg_tensor_data(tensors[rank]), inputs[rank].data(), bytes);
      }
      std::vector<gg_request*> requests(gateways);
      const auto start = Clock::now();
      for (uint32_t rank = 0; rank < gateways; ++rank) {
        check(gg_allreduce(tensors[rank], &requests[rank]), "gg_allreduce");
      }
      for (uint32_t rank = 0; rank < gateways; ++rank) {
        gg_allreduce_info info{};
        check(gg_wait(requests[rank], 300000, &info), "gg_wait");
        total.wire_bytes += info.wire_bytes;
        total.encode_seconds += info.encode_seconds;
        total.communicate_seconds += info.communicate_seconds;
        total.decode_seconds += info.decode_seconds;
        ++calls;
      }
      return std::chrono::duration<double>(Clock::now() - start).count();
    };
    std::vector<std::vector<float>> plain = inputs;
    auto through_reference = [&] {
      for (uint32_t rank = 0; rank < gateways; ++rank) plain[rank] = inputs[rank];
      return reference.allreduce(plain);
    };
    Row row{gateways, codec, bytes, 0.0, 0.0, 0.0};
    // Interleaved, so that both see the same state of this noisy machine.
    row.reference_seconds = median_seconds(through_reference, options.warmup, options.min_seconds);
    row.seconds = median_seconds(through_gateways, options.warmup, options.min_seconds);
    const auto per_call = static_cast<double>(calls);
    row.wire_bytes = static_cast<double>(total.wire_bytes) / per_call;
    row.encode_seconds = total.encode_seconds / per_call;
    row.communicate_seconds = total.communicate_seconds / per_call;
    row.decode_seconds = total.decode_seconds / per_call;
    print(row, options.json, out);
    out.flush();
  }
}

}  // namespace

AllreduceBenchOptions default_allreduce_bench_options() { return {}; }

bool run_allreduce_bench(const AllreduceBenchOptions& options, std::ostream& out,
                         std::ostream& err) {
  if (!options.json) {
    out << "gateways                 codec   size_MB    seconds  reference  vs_ref  algbw_GB/s"
           "  wire/raw\n";
  }
  try {
    for (uint32_t gateways : options.gateways) {
      TcpRingReference reference(gateways);
      for (const auto& codec : options.codecs)
        bench_codec(options, gateways, codec, reference, out);
    }
  } catch (const std::exception& error) {
    err << "gradgate bench allreduce: " << error.what() << "\n";
    return false;
  }
  return true;
}

}  // namespace gradgate::bench
