// The second reference of the all-reduce benchmark on loopback: torch.distributed's gloo
// all-reduce of the same bytes of fp32 between as many processes as there are gateways
// (bench/gloo_allreduce.py run by a Python with torch), what a CPU training job without gradgate
// uses. The script checks gloo's sums itself. Starting it takes seconds (importing torch,
// faulting in the tensors), so the bench times it once per job size and tensor size.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace gradgate::bench {

struct GlooReferenceOptions {
  std::string python = "/usr/bin/python3";  // one that imports torch
  std::string script;                       // bench/gloo_allreduce.py
  int warmup = 1;
  double min_seconds = 1.0;  // per measurement, at least 3 and at most 50 repetitions
  std::chrono::seconds limit{300};
};

struct GlooTiming {
  double seconds = 0.0;     // the median all-reduce; 0 when unavailable
  std::string unavailable;  // why there is no time; "" when there is
};

/// Times gloo all-reduces of `bytes` between `ranks` processes. Unavailable (with the reason) when
/// the script or Python cannot run, torch or its gloo backend is missing, or the script fails or
/// runs past `limit`; throws std::runtime_error if gloo's sums are wrong.
GlooTiming time_gloo_allreduce(const GlooReferenceOptions& options, uint32_t ranks, uint64_t bytes);

}  // namespace gradgate::bench
