// `gradgate bench codecs`: encode and decode speed of every codec against the same run's memcpy,
// the fraction of the memory roofline each encode reaches, and the wire ratio.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "gradgate/kernels/codec_spec.h"

namespace gradgate::bench {

struct CodecBenchOptions {
  std::vector<std::string> specs;  // codec specs (codec_spec.h syntax)
  std::vector<size_t> sizes;       // element counts
  std::vector<std::string> dists;  // gaussian, laplace, student_t3, real
  std::string real_gradients_path;
  int warmup_steps = 10;     // untimed steps first, so warm starts are warm
  double min_seconds = 0.2;  // time each measurement at least this long (and >= 3 runs)
  bool json = false;         // one JSON object per line instead of a table
};

CodecBenchOptions default_codec_bench_options();

/// Runs the benchmark, writing rows to `out` as they are measured. Returns false (after writing
/// an explanation to `err`) on a bad option.
bool run_codec_bench(const CodecBenchOptions& options, std::ostream& out, std::ostream& err);

}  // namespace gradgate::bench
