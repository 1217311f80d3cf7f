// `gradgate bench allreduce` on loopback and its two references: the plain TCP ring sums right
// without faulting in fresh memory per all-reduce, gloo's all-reduce gives a time for checked
// sums or says why it cannot, and the bench reports the gateways against both.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "allreduce_bench.h"
#include "gloo_reference.h"
#include "tcp_ring_reference.h"

namespace gradgate::bench {
namespace {

TEST(TcpRingReference, SumsEveryRanksChunks) {
  for (uint32_t ranks : {2u, 3u, 4u}) {
    // Not a multiple of the ranks or of the pieces a partial sum is added in.
    const size_t elements = 1000003;
    std::vector<std::vector<float>> data(ranks, std::vector<float>(elements));
    for (uint32_t rank = 0; rank < ranks; ++rank) {
      for (size_t i = 0; i < elements; ++i) data[rank][i] = static_cast<float>((i + rank) % 7);
    }
    TcpRingReference ring(ranks);
    EXPECT_GT(ring.allreduce(data), 0.0);
    for (uint32_t rank = 0; rank < ranks; ++rank) {
      for (size_t i = 0; i < elements; ++i) {
        float want = 0.0f;
        for (uint32_t from = 0; from < ranks; ++from) want += static_cast<float>((i + from) % 7);
        ASSERT_EQ(data[rank][i], want) << ranks << " ranks, rank " << rank << ", element " << i;
      }
    }
  }
}

// A buffer of a chunk's size allocated per all-reduce (32 MiB here) was mapped and faulted in
// afresh each time, which made 2 ranks slower than 4.
TEST(TcpRingReference, FaultsInNoFreshMemoryPerAllreduce) {
  std::vector<std::vector<float>> data(2, std::vector<float>((64 << 20) / sizeof(float), 1.0f));
  TcpRingReference ring(2);
  ring.allreduce(data);
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  ring.allreduce(data);
  getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_minflt - before.ru_minflt, 1000);  // 16384 with 32 MiB mapped per rank
  EXPECT_EQ(data[1][12345], 4.0f);
}

GlooReferenceOptions quick_gloo_options() {
  GlooReferenceOptions options;
  options.script = default_allreduce_bench_options().gloo_script;
  options.min_seconds = 0.01;
  return options;
}

TEST(GlooReference, TimesCheckedSums) {
  const GlooTiming timing = time_gloo_allreduce(quick_gloo_options(), 3, 1 << 20);
  if (timing.unavailable.find("torch is not importable") != std::string::npos) {
    GTEST_SKIP() << timing.unavailable;
  }
  EXPECT_EQ(timing.unavailable, "");
  EXPECT_GT(timing.seconds, 0.0);
}

TEST(GlooReference, SaysWhyWithoutTorch) {
  // The system's Python without its site packages (where torch is).
  const std::string python = ::testing::TempDir() + "gradgate-python-without-site";
  std::ofstream(python) << "#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n";
  ASSERT_EQ(::chmod(python.c_str(), 0755), 0);
  GlooReferenceOptions options = quick_gloo_options();
  options.python = python;
  const GlooTiming timing = time_gloo_allreduce(options, 2, 4096);
  EXPECT_NE(timing.unavailable.find("torch is not importable"), std::string::npos)
      << timing.unavailable;
  EXPECT_EQ(timing.seconds, 0.0);
  options.python = "/nonexistent/python3";
  EXPECT_EQ(time_gloo_allreduce(options, 2, 4096).unavailable, "no Python at /nonexistent/python3");
}

std::vector<nlohmann::json> bench_rows(const AllreduceBenchOptions& options, std::string& err) {
  std::ostringstream out, errors;
  EXPECT_TRUE(run_allreduce_bench(options, out, errors)) << errors.str();
  err = errors.str();
  std::istringstream lines(out.str());
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(lines, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

AllreduceBenchOptions quick_bench_options() {
  AllreduceBenchOptions options = default_allreduce_bench_options();
  options.program = GRADGATE_BINARY;
  options.gateways = {2};
  options.codecs = {"none"};
  options.sizes = {1 << 20};
  options.min_seconds = 0.01;
  options.json = true;
  return options;
}

TEST(AllreduceBench, ReportsTheGatewaysAgainstTheRingAndGloo) {
  std::string err;
  const auto rows = bench_rows(quick_bench_options(), err);
  ASSERT_EQ(rows.size(), 1u);
  const auto& row = rows[0];
  EXPECT_EQ(row.at("reference"), "tcp-ring-loopback");
  EXPECT_GT(row.at("reference_seconds").get<double>(), 0.0);
  EXPECT_NEAR(row.at("vs_reference").get<double>(),
              row.at("seconds").get<double>() / row.at("reference_seconds").get<double>(), 1e-9);
  EXPECT_EQ(row.at("gloo_reference"), "torch-gloo-loopback");
  if (row.contains("gloo_unavailable")) GTEST_SKIP() << row.at("gloo_unavailable");
  EXPECT_GT(row.at("gloo_seconds").get<double>(), 0.0);
  EXPECT_NEAR(row.at("vs_gloo").get<double>(),
              row.at("seconds").get<double>() / row.at("gloo_seconds").get<double>(), 1e-9);
}

TEST(AllreduceBench, RunsWithoutGlooAndSaysWhy) {
  AllreduceBenchOptions options = quick_bench_options();
  options.python = "/nonexistent/python3";
  options.sizes = {4096, 1 << 20};
  std::string err;
  const auto rows = bench_rows(options, err);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) {
    EXPECT_GT(row.at("reference_seconds").get<double>(), 0.0);
    EXPECT_TRUE(row.at("gloo_seconds").is_null());
    EXPECT_TRUE(row.at("vs_gloo").is_null());
    EXPECT_EQ(row.at("gloo_unavailable"), "no Python at /nonexistent/python3");
  }
  EXPECT_NE(err.find("no gloo reference: no Python at"), std::string::npos) << err;
}

}  // namespace
}  // namespace gradgate::bench
