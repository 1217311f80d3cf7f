// Real gateway processes and real worker processes using the C API: for every codec the results
// are bit-identical on every worker of the job and match the exact sum within the codec's bound;
// several local workers per gateway are summed first.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <span>

#include "gradgate/kernels/half.h"
#include "job.h"
#include "test_values.h"

namespace gradgate::gateway::testing {
namespace {

struct Case {
  std::string codec;
  uint32_t nodes;
  uint32_t local_workers;
  std::string collective = "auto";
  // Largest relative L2 error of one step's aggregate against the exact sum; < 0: sparse or
  // low-rank codecs, checked over all steps instead (error feedback delivers what a step holds
  // back in later steps).
  double step_error = -1.0;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name = info.param.codec + "_" + std::to_string(info.param.nodes) + "x" +
                     std::to_string(info.param.local_workers) + "_" + info.param.collective;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

constexpr uint64_t kSeed = 99;
constexpr int kSteps = 12;
const std::vector<TensorArg> kTensors = {
    {"layer.weight", 20000, "fp32"}, {"layer.bias", 300, "fp32"}, {"head.weight", 5000, "fp16"}};

// The exact sum over every worker of the job of tensor `t` at `step`, from the inputs as the
// workers stored them (fp16 tensors hold rounded values).
std::vector<double> exact_sum(uint32_t workers, uint32_t t, int step) {
  std::vector<double> sum(kTensors[t].elements, 0.0);
  for (uint64_t i = 0; i < sum.size(); ++i) {
    for (uint32_t worker = 0; worker < workers; ++worker) {
      float value = test::test_value(kSeed, t, step, worker, i);
      if (kTensors[t].dtype == "fp16")
        value = kernels::fp16_to_float(kernels::float_to_fp16(value));
      sum[i] += value;
    }
  }
  return sum;
}

double relative_error(std::span<const float> got, const std::vector<double>& want) {
  double error = 0.0, norm = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    error += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(error / norm);
}

double cosine(const std::vector<double>& a, const std::vector<double>& b) {
  double dot = 0.0, na = 0.0, nb = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return dot / std::sqrt(na * nb);
}

class GatewayAllreduce : public ::testing::TestWithParam<Case> {};

TEST_P(GatewayAllreduce, BitIdenticalEverywhereAndCloseToTheExactSum) {
  const Case& param = GetParam();
  bench::LocalJob job(
      job_options(param.nodes, param.local_workers, param.codec, param.collective, 30000));
  std::vector<std::unique_ptr<ChildProcess>> workers;
  std::vector<std::string> outputs;
  for (uint32_t rank = 0; rank < param.nodes; ++rank) {
    for (uint32_t local = 0; local < param.local_workers; ++local) {
      outputs.push_back(job.dir() + "/out" + std::to_string(rank) + "_" + std::to_string(local));
      workers.push_back(start_worker(job, rank, local, kTensors, kSteps, kSeed, outputs.back()));
    }
  }
  for (size_t w = 0; w < workers.size(); ++w) {
    ASSERT_EQ(workers[w]->wait_exit(std::chrono::seconds(120)), 0) << workers[w]->log();
  }
  const auto first = read_floats(outputs[0]);
  size_t per_step = 0;
  for (const auto& tensor : kTensors) per_step += tensor.elements;
  ASSERT_EQ(first.size(), per_step * kSteps);
  for (size_t w = 1; w < outputs.size(); ++w) {
    const auto other = read_floats(outputs[w]);
    ASSERT_EQ(other.size(), first.size());
    EXPECT_EQ(0, std::memcmp(other.data(), first.data(), first.size() * sizeof(float)))
        << "worker " << w << " got other bits than worker 0";
  }
  for (float value : first) ASSERT_TRUE(std::isfinite(value));

  const uint32_t world = param.nodes * param.local_workers;
  size_t offset = 0;
  for (uint32_t t = 0; t < kTensors.size(); ++t) {
    const size_t n = kTensors[t].elements;
    // Tensors under min_compress_elements travel uncompressed whatever the codec.
    const bool compressed = n >= 1024;
    const double rounding = kTensors[t].dtype == "fp16" ? 1e-3 : 1e-6;
    std::vector<double> accumulated_got(n, 0.0), accumulated_want(n, 0.0);
    for (int step = 0; step < kSteps; ++step) {
      const auto want = exact_sum(world, t, step);
      const auto got = std::span<const float>(first).subspan(step * per_step + offset, n);
      for (size_t i = 0; i < n; ++i) {
        accumulated_got[i] += got[i];
        accumulated_want[i] += want[i];
      }
      if (!compressed || param.step_error >= 0) {
        const double bound = compressed ? std::max(param.step_error, rounding) : rounding;
        EXPECT_LE(relative_error(got, want), bound) << kTensors[t].name << " step " << step;
      }
    }
    if (compressed && param.step_error < 0) {
      // Sparse, sign and low-rank frames: what error feedback delivers over the steps points
      // the way of the true sum (a wrong or shuffled result would be near 0).
      EXPECT_GT(cosine(accumulated_got, accumulated_want), 0.2) << kTensors[t].name;
    }
    offset += n;
  }
}

// A 16-bit tensor sent dense (codec none) goes on the wire in its own dtype, as DDP's all-reduce
// sends it, not at twice its size as fp32. Raw bytes count 2 per element.
TEST(GatewayAllreduceDense, SixteenBitTensorsTravelInTheirOwnDtype) {
  constexpr int kDenseSteps = 3;
  constexpr double kElements = 50000;
  bench::LocalJob job(job_options(2, 1, "none"));
  const auto run = [&](const std::string& dtype) {
    const std::vector<TensorArg> tensors = {{"dense." + dtype, 50000, dtype}};
    auto w0 = start_worker(job, 0, 0, tensors, kDenseSteps, kSeed, job.dir() + "/d0" + dtype);
    auto w1 = start_worker(job, 1, 0, tensors, kDenseSteps, kSeed, job.dir() + "/d1" + dtype);
    EXPECT_EQ(w0->wait_exit(std::chrono::seconds(60)), 0) << w0->log();
    EXPECT_EQ(w1->wait_exit(std::chrono::seconds(60)), 0) << w1->log();
    EXPECT_EQ(read_floats(job.dir() + "/d0" + dtype), read_floats(job.dir() + "/d1" + dtype));
    const auto status = nlohmann::json::parse(get_body(job.admin_port(0), "/v1/status"));
    return std::make_pair(status.at("raw_bytes").get<double>(),
                          status.at("wire_bytes").get<double>());
  };
  const auto [bf16_raw, bf16_wire] = run("bf16");
  EXPECT_EQ(bf16_raw, kDenseSteps * kElements * 2);
  EXPECT_LE(bf16_wire, 1.05 * bf16_raw);
  const auto [raw, wire] = run("fp16");
  EXPECT_EQ(raw - bf16_raw, kDenseSteps * kElements * 2);
  EXPECT_LE(wire - bf16_wire, 1.05 * (raw - bf16_raw));
  const std::string metrics = get_body(job.admin_port(0), "/metrics");
  EXPECT_EQ(sample(metrics, "gradgate_allreduces_total{codec=\"bf16\"}"), kDenseSteps) << metrics;
  EXPECT_EQ(sample(metrics, "gradgate_allreduces_total{codec=\"fp16\"}"), kDenseSteps) << metrics;
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, GatewayAllreduce,
    ::testing::Values(Case{"none", 2, 1, "auto", 1e-6}, Case{"none", 4, 2, "auto", 1e-6},
                      Case{"fp16", 3, 1, "auto", 2e-3}, Case{"bf16", 2, 2, "auto", 1e-2},
                      Case{"qsgd:bits=8,workers=8", 4, 1, "auto", 0.05}, Case{"sign", 2, 1},
                      Case{"topk:density=0.01", 3, 1},
                      Case{"topk:density=0.01", 4, 1, "aggregator"},
                      Case{"randomk:density=0.05", 2, 2}, Case{"powersgd:rank=4", 2, 1}),
    case_name);

}  // namespace
}  // namespace gradgate::gateway::testing
