// `gradgate bench node` against a real gateway process: a row per worker count and size, with
// its times and the sums checked.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "node_bench.h"

namespace gradgate::bench {
namespace {

TEST(NodeBench, GivesARowPerWorkerCountAndSizeOfCorrectSums) {
  NodeBenchOptions options;
  options.program = GRADGATE_BINARY;
  options.local_workers = {1, 3};
  options.sizes = {4096, 1 << 20};
  options.tensors = 3;
  options.min_seconds = 0.01;
  options.json = true;
  std::ostringstream out, err;
  ASSERT_TRUE(run_node_bench(options, out, err)) << err.str();
  std::istringstream lines(out.str());
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(lines, line);) rows.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(rows.size(), 4u) << out.str();
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    EXPECT_EQ(row.at("local_workers"), options.local_workers[i / 2]);
    EXPECT_EQ(row.at("bytes"), options.sizes[i % 2]);
    EXPECT_EQ(row.at("tensors"), 3);
    EXPECT_GT(row.at("seconds").get<double>(), 0.0);
    EXPECT_GT(row.at("copy_seconds").get<double>(), 0.0);
    EXPECT_NEAR(row.at("vs_copy").get<double>(),
                row.at("copy_seconds").get<double>() / row.at("seconds").get<double>(), 1e-9);
  }
}

}  // namespace
}  // namespace gradgate::bench
