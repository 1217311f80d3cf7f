// `gradgate bench allreduce`: the time of an all-reduce through real gateway processes on
// loopback (workers in this process using the C API, the gateways' TCP transport, the codec),
// over a sweep of sizes and codecs, against a plain TCP ring all-reduce of the same size
// measured in the same run (see tcp_ring_reference.h). Reports seconds, bus bandwidth, wire
// bytes and the ratio to the reference.
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
  std::vector<uint32_t> gateways = {2, 4};
  int warmup = 1;
  double min_seconds = 1.0;  // per measurement, at least 3 and at most 50 repetitions
  bool json = false;
};

AllreduceBenchOptions default_allreduce_bench_options();

/// Runs the sweep; false (with the reason on `err`) if a gateway or a call fails.
bool run_allreduce_bench(const AllreduceBenchOptions& options, std::ostream& out,
                         std::ostream& err);

}  // namespace gradgate::bench
