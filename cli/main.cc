// gradgate: one binary, one subcommand per job.
//   gradgate bench codecs [--codecs SPEC...] [--sizes N...] [--dists KIND...] [--json]
//   gradgate version
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>

#include "codec_bench.h"
#include "gradgate/config.h"

namespace {

// Where the captured real gradients live: $GRADGATE_DATA_DIR, else the source tree's bench/data.
std::string default_real_gradients_path() {
  const char* dir = std::getenv("GRADGATE_DATA_DIR");
  return std::string(dir ? dir : GRADGATE_DEFAULT_DATA_DIR) + "/fashion_mnist_gradients.f32";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gradgate: gradient-compression gateway for distributed training"};
  app.require_subcommand(1);

  auto* version =
      app.add_subcommand("version", "Print the version and the optional parts built in");
  version->callback([] {
    std::cout << "gradgate " << GRADGATE_VERSION << " (cuda " << GRADGATE_HAVE_CUDA << ", dpdk "
              << GRADGATE_HAVE_DPDK << ")\n";
  });

  auto* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  auto options = gradgate::bench::default_codec_bench_options();
  options.real_gradients_path = default_real_gradients_path();
  auto* codecs = bench->add_subcommand("codecs", "Encode/decode speed, roofline and wire ratio");
  codecs->add_option("--codecs", options.specs, "Codec specs, e.g. topk:density=0.01")
      ->capture_default_str();
  codecs->add_option("--sizes", options.sizes, "Element counts")->capture_default_str();
  codecs->add_option("--dists", options.dists, "Data kinds: gaussian laplace student_t3 real")
      ->capture_default_str();
  codecs
      ->add_option("--real-gradients", options.real_gradients_path,
                   "Captured real gradients (fp32)")
      ->capture_default_str();
  codecs->add_option("--warmup", options.warmup_steps, "Untimed steps before timing")
      ->capture_default_str();
  codecs->add_option("--min-seconds", options.min_seconds, "Least time per measurement")
      ->capture_default_str();
  codecs->add_flag("--json", options.json, "One JSON object per line");
  int exit_code = 0;
  codecs->callback([&] {
    if (!gradgate::bench::run_codec_bench(options, std::cout, std::cerr)) exit_code = 2;
  });

  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
