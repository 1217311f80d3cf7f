#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include "allreduce_bench.h"
#include "codec_bench.h"
#include "commands.h"
#include "node_bench.h"

namespace gradgate::cli {
namespace {

// Where the captured real gradients live: $GRADGATE_DATA_DIR, else the source tree's bench/data.
std::string default_real_gradients_path() {
  const char* dir = std::getenv("GRADGATE_DATA_DIR");
  return std::string(dir ? dir : GRADGATE_DEFAULT_DATA_DIR) + "/fashion_mnist_gradients.f32";
}

void add_allreduce_bench(CLI::App& bench, int& exit_code) {
  auto options =
      std::make_shared<bench::AllreduceBenchOptions>(bench::default_allreduce_bench_options());
  auto* allreduce = bench.add_subcommand(
      "allreduce",
      "All-reduce through gateways: on loopback against a plain TCP ring and gloo, or on a veth "
      "pair (root) with each transport against the first");
  allreduce->add_option("--sizes", options->sizes, "Bytes per all-reduce")->capture_default_str();
  allreduce->add_option("--codecs", options->codecs, "Codec specs")->capture_default_str();
  allreduce->add_option("--gateways", options->gateways,
                        "Gateways in the job [default: 2 4 on loopback, 2 on veth]");
  allreduce
      ->add_option("--transport", options->transports,
                   "Transports between the gateways, timed in turn; the first is the reference "
                   "on veth")
      ->check(CLI::IsMember({"tcp", "dpdk"}))
      ->capture_default_str();
  allreduce
      ->add_option("--link", options->link,
                   "Where the gateways run: loopback, veth (two network namespaces; root) or "
                   "auto (veth when dpdk or --link-mbit is given)")
      ->check(CLI::IsMember({"auto", "loopback", "veth"}))
      ->capture_default_str();
  allreduce
      ->add_option("--link-mbit", options->link_mbit,
                   "On a veth pair: Mbit/s each way (tc tbf); the reference is then an "
                   "uncompressed ring all-reduce at that rate (0: no limit)")
      ->capture_default_str();
  allreduce
      ->add_option("--dpdk-idle-sleep-us", options->dpdk_idle_sleep_us,
                   "The DPDK gateways' dpdk.idle_sleep_us (0: spin when idle)")
      ->capture_default_str();
  allreduce->add_option("--gateway-set", options->gateway_settings,
                        "More gateway settings, section.key=value (the gateway's --set)");
  allreduce
      ->add_option("--python", options->python,
                   "On loopback: the Python with torch that runs the gloo reference (\"\": none)")
      ->capture_default_str();
  allreduce->add_option("--warmup", options->warmup, "Untimed all-reduces before timing")
      ->capture_default_str();
  allreduce->add_option("--min-seconds", options->min_seconds, "Least time per measurement")
      ->capture_default_str();
  allreduce->add_flag("--json", options->json, "One JSON object per line");
  allreduce->callback([options, &exit_code] {
    options->program = std::filesystem::read_symlink("/proc/self/exe").string();
    if (!bench::run_allreduce_bench(*options, std::cout, std::cerr)) exit_code = 2;
  });
}

void add_node_bench(CLI::App& bench, int& exit_code) {
  auto options = std::make_shared<bench::NodeBenchOptions>();
  auto* node = bench.add_subcommand(
      "node",
      "One gateway's node path: its local workers all-reduce several tensors at once, against "
      "copying their buffers on one core");
  node->add_option("--sizes", options->sizes, "Bytes per tensor")->capture_default_str();
  node->add_option("--local-workers", options->local_workers, "Local workers of the job, in turn")
      ->capture_default_str();
  node->add_option("--tensors", options->tensors, "Tensors each worker all-reduces at once")
      ->capture_default_str();
  node->add_option("--warmup", options->warmup, "Untimed rounds before timing")
      ->capture_default_str();
  node->add_option("--min-seconds", options->min_seconds, "Least time per measurement")
      ->capture_default_str();
  node->add_flag("--json", options->json, "One JSON object per line");
  node->callback([options, &exit_code] {
    options->program = std::filesystem::read_symlink("/proc/self/exe").string();
    if (!bench::run_node_bench(*options, std::cout, std::cerr)) exit_code = 2;
  });
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
  auto* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  auto options = std::make_shared<bench::CodecBenchOptions>(bench::default_codec_bench_options());
  options->real_gradients_path = default_real_gradients_path();
  auto* codecs = bench->add_subcommand("codecs", "Encode/decode speed, roofline and wire ratio");
  codecs->add_option("--codecs", options->specs, "Codec specs, e.g. topk:density=0.01")
      ->capture_default_str();
  codecs->add_option("--sizes", options->sizes, "Element counts")->capture_default_str();
  codecs->add_option("--dists", options->dists, "Data kinds: gaussian laplace student_t3 real")
      ->capture_default_str();
  codecs
      ->add_option("--real-gradients", options->real_gradients_path,
                   "Captured real gradients (fp32)")
      ->capture_default_str();
  codecs->add_option("--warmup", options->warmup_steps, "Untimed steps before timing")
      ->capture_default_str();
  codecs->add_option("--min-seconds", options->min_seconds, "Least time per measurement")
      ->capture_default_str();
  codecs->add_flag("--json", options->json, "One JSON object per line");
  codecs->callback([options, &exit_code] {
    if (!bench::run_codec_bench(*options, std::cout, std::cerr)) exit_code = 2;
  });
  add_allreduce_bench(*bench, exit_code);
  add_node_bench(*bench, exit_code);
}

}  // namespace gradgate::cli
