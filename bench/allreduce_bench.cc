#include "allreduce_bench.h"

#include <chrono>
#include <cstring>
#include <functional>
#include <iomanip>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "bench_workers.h"
#include "gloo_reference.h"
#include "gradgate/client.h"
#include "local_job.h"
#include "tcp_ring_reference.h"
#include "veth_pair.h"

namespace gradgate::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Row {
  std::string transport, link;
  uint32_t gateways = 0;
  std::string codec;
  uint64_t bytes = 0;
  double seconds = 0.0, reference_seconds = 0.0;
  std::string reference;    // what reference_seconds measured
  double wire_bytes = 0.0;  // per gateway and all-reduce
  // Per gateway and all-reduce, as the gateways report them.
  double encode_seconds = 0.0, communicate_seconds = 0.0, decode_seconds = 0.0;
  double gateway_cpu_seconds = 0.0;               // all gateways together, per all-reduce
  std::optional<GlooTiming> gloo = std::nullopt;  // on loopback: the second reference
};

void print_header(std::ostream& out) {
  out << std::setw(9) << "transport" << std::setw(9) << "gateways" << std::setw(22) << "codec"
      << std::setw(10) << "size_MB" << std::setw(11) << "seconds" << std::setw(11) << "reference"
      << std::setw(10) << "vs_ref" << std::setw(11) << "gloo" << std::setw(10) << "vs_gloo"
      << std::setw(11) << "algbw_GB/s" << std::setw(11) << "wire/raw" << std::setw(10) << "gw_cpu_s"
      << "\n";
}

void print(const Row& row, bool json, std::ostream& out) {
  const double ratio = row.seconds / row.reference_seconds;
  const double algbw = static_cast<double>(row.bytes) / row.seconds / 1e9;
  const bool gloo_timed = row.gloo && row.gloo->unavailable.empty();
  if (json) {
    nlohmann::json fields{{"transport", row.transport},
                          {"link", row.link},
                          {"gateways", row.gateways},
                          {"codec", row.codec},
                          {"bytes", row.bytes},
                          {"seconds", row.seconds},
                          {"reference", row.reference},
                          {"reference_seconds", row.reference_seconds},
                          {"vs_reference", ratio},
                          {"algbw_gbps", algbw},
                          {"wire_bytes", row.wire_bytes},
                          {"wire_ratio", row.wire_bytes / static_cast<double>(row.bytes)},
                          {"encode_seconds", row.encode_seconds},
                          {"communicate_seconds", row.communicate_seconds},
                          {"decode_seconds", row.decode_seconds},
                          {"gateway_cpu_seconds", row.gateway_cpu_seconds}};
    if (row.gloo) {
      fields["gloo_reference"] = "torch-gloo-loopback";
      fields["gloo_seconds"] = gloo_timed ? nlohmann::json(row.gloo->seconds) : nullptr;
      fields["vs_gloo"] = gloo_timed ? nlohmann::json(row.seconds / row.gloo->seconds) : nullptr;
      if (!gloo_timed) fields["gloo_unavailable"] = row.gloo->unavailable;
    }
    out << fields.dump() << "\n";
    return;
  }
  out << std::setw(9) << row.transport << std::setw(9) << row.gateways << std::setw(22) << row.codec
      << std::setw(10) << row.bytes / (1 << 20) << std::fixed << std::setprecision(4)
      << std::setw(11) << row.seconds << std::setw(11) << row.reference_seconds
      << std::setprecision(2) << std::setw(10) << ratio;
  if (gloo_timed) {
    out << std::setprecision(4) << std::setw(11) << row.gloo->seconds << std::setprecision(2)
        << std::setw(10) << row.seconds / row.gloo->seconds;
  } else {
    out << std::setw(11) << "-" << std::setw(10) << "-";
  }
  out << std::setw(11) << algbw << std::setprecision(4) << std::setw(11)
      << row.wire_bytes / static_cast<double>(row.bytes) << std::setw(10) << row.gateway_cpu_seconds
      << "\n";
}

double gateways_cpu_seconds(LocalJob& job) {
  double seconds = 0.0;
  for (uint32_t rank = 0; rank < job.options().nodes; ++rank) {
    seconds += job.gateway(rank).cpu_seconds();
  }
  return seconds;
}

// Times an all-reduce of the same inputs another way; returns its seconds.
using Reference = std::function<double(uint64_t bytes, const std::vector<std::vector<float>>&)>;
// The gloo all-reduce of `bytes`.
using GlooReference = std::function<GlooTiming(uint64_t bytes)>;

// Prints and returns one row per size (`base` filled in) for all-reduces through `job`'s gateways,
// timed after `gloo` (if given) and `reference` for the same size; without a reference, a row is
// its own.
std::vector<Row> sweep(const AllreduceBenchOptions& options, LocalJob& job, const Row& base,
                       const Reference& reference, const GlooReference& gloo, std::ostream& out) {
  std::vector<Row> rows;
  const uint32_t gateways = job.options().nodes;
  Workers workers(job);
  for (uint64_t bytes : options.sizes) {
    const size_t elements = bytes / sizeof(float);
    std::vector<std::vector<float>> inputs;
    for (uint32_t rank = 0; rank < gateways; ++rank) {
      inputs.push_back(random_gradient(elements, rank + 1));
    }
    auto tensors = workers.declare("bench." + std::to_string(bytes), elements);
    gg_allreduce_info total{};
    uint64_t calls = 0, runs = 0;
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
      ++runs;
      return std::chrono::duration<double>(Clock::now() - start).count();
    };
    Row row = base;
    row.bytes = bytes;
    // A reference timed here is interleaved, so that both see the same state of this noisy machine.
    if (gloo) row.gloo = gloo(bytes);
    if (reference) row.reference_seconds = reference(bytes, inputs);
    for (int i = 0; i < options.warmup; ++i) through_gateways();
    const double cpu_before = gateways_cpu_seconds(job);
    const uint64_t runs_before = runs;
    row.seconds = median_seconds(through_gateways, 0, options.min_seconds);
    row.gateway_cpu_seconds =
        (gateways_cpu_seconds(job) - cpu_before) / static_cast<double>(runs - runs_before);
    if (!reference) row.reference_seconds = row.seconds;
    const auto per_call = static_cast<double>(calls);
    row.wire_bytes = static_cast<double>(total.wire_bytes) / per_call;
    row.encode_seconds = total.encode_seconds / per_call;
    row.communicate_seconds = total.communicate_seconds / per_call;
    row.decode_seconds = total.decode_seconds / per_call;
    print(row, options.json, out);
    out.flush();
    rows.push_back(row);
  }
  return rows;
}

LocalJobOptions base_job_options(const AllreduceBenchOptions& options, uint32_t gateways,
                                 const std::string& codec) {
  LocalJobOptions job_options;
  job_options.program = options.program;
  job_options.nodes = gateways;
  job_options.codec = codec;
  job_options.timeout_ms = 120000;
  job_options.log_level = "warn";
  job_options.settings = options.gateway_settings;
  return job_options;
}

void bench_loopback(const AllreduceBenchOptions& options, std::ostream& out, std::ostream& err) {
  const GlooReferenceOptions gloo_options{.python = options.python,
                                          .script = options.gloo_script,
                                          .warmup = options.warmup,
                                          .min_seconds = options.min_seconds};
  std::string gloo_unavailable;  // once it is, gloo is not tried again
  for (uint32_t gateways : options.gateways) {
    TcpRingReference ring(gateways);
    const Reference reference = [&](uint64_t, const std::vector<std::vector<float>>& inputs) {
      std::vector<std::vector<float>> plain = inputs;
      auto once = [&] {
        for (uint32_t rank = 0; rank < gateways; ++rank) plain[rank] = inputs[rank];
        return ring.allreduce(plain);
      };
      return median_seconds(once, options.warmup, options.min_seconds);
    };
    // Timed once per size (it takes seconds to start), with the first codec.
    std::map<uint64_t, GlooTiming> gloo_timings;
    const GlooReference gloo = [&](uint64_t bytes) {
      if (!gloo_unavailable.empty()) return GlooTiming{0.0, gloo_unavailable};
      if (!gloo_timings.contains(bytes)) {
        const GlooTiming timing = time_gloo_allreduce(gloo_options, gateways, bytes);
        if (!timing.unavailable.empty()) {
          gloo_unavailable = timing.unavailable;
          err << "gradgate bench allreduce: no gloo reference: " << gloo_unavailable << "\n";
        }
        gloo_timings[bytes] = timing;
      }
      return gloo_timings.at(bytes);
    };
    for (const auto& codec : options.codecs) {
      LocalJob job(base_job_options(options, gateways, codec));
      sweep(options, job, {"tcp", "loopback", gateways, codec, 0, 0.0, 0.0, "tcp-ring-loopback"},
            reference, gloo, out);
    }
  }
}

// The DPDK ports' own addresses: not the kernel's on the veth ends, so the kernel ignores them.
const char* const kDpdkAddresses[] = {"10.199.1.1", "10.199.1.2"};

// The least time an uncompressed ring all-reduce of `bytes` between 2 gateways takes on a link of
// `mbit` Mbit/s each way: each sends 2 (P - 1) / P of the tensor.
double ring_seconds_at_rate(uint64_t bytes, uint64_t mbit) {
  return static_cast<double>(bytes) * 8.0 / (static_cast<double>(mbit) * 1e6);
}

void bench_veth(const AllreduceBenchOptions& options, std::ostream& out) {
  VethPair pair(options.link_mbit);
  const std::string link =
      options.link_mbit > 0 ? "veth@" + std::to_string(options.link_mbit) + "mbit" : "veth";
  const std::string reference_name = options.transports.front() + "-gateways-" + link;
  for (const auto& codec : options.codecs) {
    std::map<uint64_t, double> first_seconds;  // the reference: the first transport's
    const Reference from_first = [&](uint64_t bytes, const std::vector<std::vector<float>>&) {
      return first_seconds.at(bytes);
    };
    for (size_t index = 0; index < options.transports.size(); ++index) {
      const std::string& transport = options.transports[index];
      LocalJobOptions job_options = base_job_options(options, 2, codec);
      job_options.transport = transport;
      job_options.dpdk_idle_sleep_us = options.dpdk_idle_sleep_us;
      for (int end = 0; end < 2; ++end) {
        job_options.netns.push_back(pair.netns(end));
        job_options.addresses.push_back(transport == "dpdk" ? kDpdkAddresses[end]
                                                            : pair.address(end));
        if (transport == "dpdk") {
          job_options.dpdk_ports.push_back("net_af_packet" + std::to_string(end) +
                                           ",iface=" + pair.device(end) + ",framecnt=4096");
        }
      }
      LocalJob job(job_options);
      // The first transport is its own reference, or on a rate-limited link the link's rate.
      Reference reference = index > 0 ? from_first : Reference();
      Row base{transport, link, 2, codec, 0, 0.0, 0.0, reference_name};
      if (index == 0 && options.link_mbit > 0) {
        reference = [&](uint64_t bytes, const std::vector<std::vector<float>>&) {
          return ring_seconds_at_rate(bytes, options.link_mbit);
        };
        base.reference = "uncompressed-ring-at-link-rate";
      }
      const auto rows = sweep(options, job, base, reference, {}, out);
      if (index == 0) {
        for (const Row& row : rows) first_seconds[row.bytes] = row.seconds;
      }
    }
  }
}

// Why the options do not fit together; "" if they do. Resolves options.link and options.gateways.
std::string resolve(AllreduceBenchOptions& options) {
  if (options.transports.empty()) return "no transport listed";
  bool dpdk = false;
  for (const auto& transport : options.transports) {
    if (transport != "tcp" && transport != "dpdk") return "unknown transport " + transport;
    dpdk = dpdk || transport == "dpdk";
  }
  if (options.link == "auto") options.link = dpdk || options.link_mbit > 0 ? "veth" : "loopback";
  if (options.link == "loopback") {
    if (options.link_mbit > 0) return "--link-mbit needs --link veth (loopback has no rate limit)";
    if (dpdk) return "the dpdk transport needs --link veth (no DPDK port on loopback)";
    if (options.gateways.empty()) options.gateways = {2, 4};
    return "";
  }
  if (options.link != "veth") return "unknown link " + options.link;
  if (options.gateways.empty()) options.gateways = {2};
  if (options.gateways != std::vector<uint32_t>{2}) return "a veth pair joins 2 gateways only";
  return VethPair::unavailable();
}

}  // namespace

AllreduceBenchOptions default_allreduce_bench_options() {
  AllreduceBenchOptions options;
  options.gloo_script = GRADGATE_GLOO_SCRIPT;
  return options;
}

bool run_allreduce_bench(const AllreduceBenchOptions& given, std::ostream& out, std::ostream& err) {
  AllreduceBenchOptions options = given;
  const std::string misfit = resolve(options);
  if (!misfit.empty()) {
    err << "gradgate bench allreduce: " << misfit << "\n";
    return false;
  }
  if (!options.json) print_header(out);
  try {
    if (options.link == "veth") {
      bench_veth(options, out);
    } else {
      bench_loopback(options, out, err);
    }
  } catch (const std::exception& error) {
    err << "gradgate bench allreduce: " << error.what() << "\n";
    return false;
  }
  return true;
}

}  // namespace gradgate::bench
