// Command line of gradgate_kernel_bench:
//
//   gradgate_kernel_bench [--sizes N,N,...] [--warmup STEPS] [--reps RUNS] [--input FILE]
//                         [--dump FILE] [SPEC ...]
//
// SPECs are codec specs (codec_spec.h syntax); sizes are element counts, written as decimals or
// as powers of two (2^24). --input takes the gradient from a file of raw float32 (tiled to each
// size) instead of the gaussian generator; --dump writes the gradient of the largest size there,
// as raw float32, for references outside the benchmark.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "gradgate/base/status.h"
#include "gradgate/kernels/frame.h"

namespace gradgate::bench {

struct KernelBenchOptions {
  std::vector<std::string> specs = {"none",
                                    "fp16",
                                    "bf16",
                                    "sign",
                                    "qsgd:bits=4,workers=8",
                                    "qsgd:bits=8,workers=64",
                                    "topk:density=0.01",
                                    "topk:density=0.01,select=exact",
                                    "randomk:density=0.01",
                                    "powersgd:rank=4"};
  std::vector<size_t> sizes = {size_t{1} << 20, size_t{1} << 22, size_t{1} << 24, size_t{1} << 26,
                               size_t{1} << 28};
  int warmup = 10;  // untimed encode steps first, so that warm starts are warm
  int reps = 10;    // timed runs; the median counts
  std::string input;
  std::string dump;
};

/// An element count, "1048576" or "2^20", in [1, kMaxFrameElements].
inline std::optional<size_t> parse_size(std::string_view text) {
  const auto number = [](std::string_view digits) -> std::optional<uint64_t> {
    uint64_t value = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
    return value;
  };
  std::optional<uint64_t> value;
  if (text.starts_with("2^")) {
    const auto exponent = number(text.substr(2));
    if (exponent && *exponent < 64) value = uint64_t{1} << *exponent;
  } else {
    value = number(text);
  }
  if (!value || *value == 0 || *value > kernels::kMaxFrameElements) return std::nullopt;
  return static_cast<size_t>(*value);
}

/// The options of `args` (argv without the program name): the defaults for what they omit.
inline Result<KernelBenchOptions> parse_kernel_bench_args(std::span<const std::string_view> args) {
  KernelBenchOptions options;
  std::vector<std::string> specs;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (!arg.starts_with("--")) {
      specs.emplace_back(arg);
      continue;
    }
    if (i + 1 == args.size()) {
      return Status(ErrorCode::kInvalidArgument, std::string(arg) + " needs a value");
    }
    const std::string_view value = args[++i];
    const auto bad = [&] {
      return Status(ErrorCode::kInvalidArgument,
                    "bad value '" + std::string(value) + "' for " + std::string(arg));
    };
    if (arg == "--sizes") {
      options.sizes.clear();
      for (size_t start = 0; start <= value.size();) {
        const size_t comma = std::min(value.find(',', start), value.size());
        const auto size = parse_size(value.substr(start, comma - start));
        if (!size) return bad();
        options.sizes.push_back(*size);
        start = comma + 1;
      }
    } else if (arg == "--warmup" || arg == "--reps") {
      int count = 0;
      const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), count);
      if (error != std::errc() || end != value.data() + value.size() || count < 0 ||
          (arg == "--reps" && count == 0)) {
        return bad();
      }
      (arg == "--warmup" ? options.warmup : options.reps) = count;
    } else if (arg == "--input") {
      options.input = value;
    } else if (arg == "--dump") {
      options.dump = value;
    } else {
      return Status(ErrorCode::kInvalidArgument, "unknown option " + std::string(arg));
    }
  }
  if (!specs.empty()) options.specs = std::move(specs);
  return options;
}

}  // namespace gradgate::bench
