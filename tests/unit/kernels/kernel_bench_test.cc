// The host-side logic of the GPU kernel benchmark (bench/kernels): its gaussian generator (the
// same host-device function the device fills with), the roofline model, the hand-written JSON and
// the command line.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "gradgate/kernels/codec_spec.h"
#include "kernels/bench_options.h"
#include "kernels/encode_traffic.h"
#include "kernels/gaussian.h"
#include "kernels/json_line.h"

namespace gradgate::bench {
namespace {

TEST(KernelBenchGaussian, IsStandardNormalAndReproducible) {
  constexpr uint64_t kBlocks = 1 << 16;
  double sum = 0.0, squares = 0.0, beyond_two_sigma = 0.0;
  for (uint64_t block = 0; block < kBlocks; ++block) {
    float values[4], again[4];
    gaussian4(block, 42, values);
    gaussian4(block, 42, again);
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(std::isfinite(values[i]));
      ASSERT_EQ(values[i], again[i]);
      sum += values[i];
      squares += static_cast<double>(values[i]) * values[i];
      beyond_two_sigma += std::fabs(values[i]) > 2.0f;
    }
  }
  const double n = 4.0 * kBlocks;
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(squares / n, 1.0, 0.01);
  EXPECT_NEAR(beyond_two_sigma / n, 0.0455, 0.002);
}

TEST(KernelBenchGaussian, SeedsGiveDifferentTensors) {
  float a[4], b[4];
  gaussian4(7, 1, a);
  gaussian4(7, 2, b);
  EXPECT_NE(a[0], b[0]);
}

TEST(KernelBenchTraffic, FollowsTheCpuModelPlusTheFrame) {
  const auto params = [](const char* spec) { return kernels::parse_codec_spec(spec).value(); };
  constexpr size_t n = 1000;
  EXPECT_DOUBLE_EQ(least_encode_traffic(params("none"), n, 4048), 4.0 + 4.048);
  EXPECT_DOUBLE_EQ(least_encode_traffic(params("fp16"), n, 2048), 12.0 + 2.048);
  EXPECT_DOUBLE_EQ(least_encode_traffic(params("fp16:ef=0"), n, 2048), 4.0 + 2.048);
  EXPECT_DOUBLE_EQ(least_encode_traffic(params("sign"), n, 1000), 8.0 + 12.0 + 1.0);
  EXPECT_DOUBLE_EQ(least_encode_traffic(params("qsgd:bits=4,workers=8"), n, 2000),
                   8.0 + 12.0 + 2.0);
  EXPECT_DOUBLE_EQ(least_encode_traffic(params("topk:density=0.01"), n, 500), 12.5);
  EXPECT_DOUBLE_EQ(least_encode_traffic(params("topk:density=0.01,ef=0"), n, 500), 4.5);
}

TEST(KernelBenchTraffic, RooflineIsTheShareOfTheCopyBandwidth) {
  // 4 B/element at 1000 GB/s of gradient moves 1000 GB/s; a copy of 2000 GB/s (read + write).
  EXPECT_DOUBLE_EQ(roofline_fraction(1000.0, 4.0, 2000.0), 0.5);
  EXPECT_DOUBLE_EQ(roofline_fraction(500.0, 12.0, 3000.0), 0.5);
}

TEST(KernelBenchJson, WritesOneObjectInOrder) {
  JsonLine line;
  line.text("codec", "topk")
      .count("n", 1048576)
      .number("gbps", 1.5)
      .number("k_ratio", std::optional<double>())
      .number("bad", std::nan(""))
      .text("error", "say \"no\"\\\n");
  EXPECT_EQ(line.str(), R"({"codec":"topk","n":1048576,"gbps":1.5,"k_ratio":null,"bad":null,)"
                        R"("error":"say \"no\"\\\u000a"})");
  EXPECT_EQ(JsonLine().str(), "{}");
}

TEST(KernelBenchJson, NumbersRoundTrip) {
  JsonLine line;
  line.number("x", 0.1).number("y", 1e-300).number("z", 12345678.0);
  EXPECT_EQ(line.str(), R"({"x":0.1,"y":1e-300,"z":12345678})");
}

TEST(KernelBenchOptions, ParsesSizes) {
  EXPECT_EQ(parse_size("2^20"), size_t{1} << 20);
  EXPECT_EQ(parse_size("1000"), 1000u);
  EXPECT_EQ(parse_size("4294967295"), 4294967295u);
  EXPECT_FALSE(parse_size("2^32"));
  EXPECT_FALSE(parse_size("0"));
  EXPECT_FALSE(parse_size(""));
  EXPECT_FALSE(parse_size("2^"));
  EXPECT_FALSE(parse_size("12x"));
  EXPECT_FALSE(parse_size("2^99"));
}

TEST(KernelBenchOptions, DefaultsAndOverrides) {
  const auto defaults = parse_kernel_bench_args({}).value();
  EXPECT_EQ(defaults.sizes.size(), 5u);
  EXPECT_EQ(defaults.sizes.back(), size_t{1} << 28);
  EXPECT_EQ(defaults.specs.size(), 10u);
  for (const auto& spec : defaults.specs) EXPECT_TRUE(kernels::parse_codec_spec(spec).ok()) << spec;

  const std::vector<std::string_view> args = {
      "--sizes", "2^10,7",     "--reps",           "3",        "fp16",
      "--dump",  "/tmp/x.f32", "topk:density=0.1", "--warmup", "0"};
  const auto options = parse_kernel_bench_args(args).value();
  EXPECT_EQ(options.sizes, (std::vector<size_t>{1024, 7}));
  EXPECT_EQ(options.reps, 3);
  EXPECT_EQ(options.warmup, 0);
  EXPECT_EQ(options.dump, "/tmp/x.f32");
  EXPECT_EQ(options.specs, (std::vector<std::string>{"fp16", "topk:density=0.1"}));
}

TEST(KernelBenchOptions, RejectsBadArguments) {
  for (const std::vector<std::string_view>& args : {std::vector<std::string_view>{"--sizes"},
                                                    {"--sizes", "2^20,"},
                                                    {"--reps", "0"},
                                                    {"--warmup", "-1"},
                                                    {"--reps", "x"},
                                                    {"--frobnicate", "1"}}) {
    EXPECT_FALSE(parse_kernel_bench_args(args).ok()) << args[0];
  }
}

}  // namespace
}  // namespace gradgate::bench
