// `gradgate bench node`: what one gateway's node path costs. Its local workers (C-API clients in
// this process, over the real socket and shared memory) all-reduce several tensors at once in a
// job of that one gateway (which has no other gateway to send to: no codec runs), so a round's
// time is the ingress, the node sum of the workers' buffers and the write-back into them. The
// reference, timed in the
// same run: copying every worker's buffers once on one core, which moves as many bytes as the
// least a node must (read each worker's gradient once, write its result once); vs_copy is its
// time over the round's.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace gradgate::bench {

struct NodeBenchOptions {
  std::string program;                                      // the gradgate binary
  std::vector<uint64_t> sizes = {4ull << 20, 32ull << 20};  // bytes per tensor
  std::vector<uint32_t> local_workers = {2, 4};             // per job, in turn
  uint32_t tensors = 8;                                     // all-reduced at once
  int warmup = 1;
  double min_seconds = 1.0;  // per measurement, at least 3 and at most 50 repetitions
  bool json = false;
};

/// Runs the sweep; false (with the reason on `err`) if the gateway or a call fails.
bool run_node_bench(const NodeBenchOptions& options, std::ostream& out, std::ostream& err);

}  // namespace gradgate::bench
