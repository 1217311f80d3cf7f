// The collectives over real TCP between in-process gateways: for every codec and algorithm the
// result is bit-identical on every gateway, and the job-level error-feedback invariant holds:
// the sum over steps of the aggregates plus every gateway's residuals equals the sum over steps
// and gateways of the inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <random>
#include <string>

#include "cluster.h"
#include "gradgate/kernels/codec_spec.h"

namespace gradgate::gateway {
namespace {

using testing::Cluster;

struct Case {
  std::string spec;
  CollectiveMode mode;
  uint32_t nodes;
  size_t elements;
  size_t rows = 0, cols = 0;
  // Relative drift allowed between outputs + residuals and inputs. Summable 16-bit frames round
  // each partial sum of the ring to 16 bits, an error no residual keeps (as in any fp16/bf16
  // all-reduce); every other codec is exact to fp32 rounding.
  double tolerance = 2e-3;
  size_t segment_elements = 0;  // 0: parts are not cut into segments
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name = info.param.spec + "_" + std::to_string(info.param.nodes) + "nodes_mode" +
                     std::to_string(static_cast<int>(info.param.mode));
  if (info.param.segment_elements != 0) {
    name += "_segments" + std::to_string(info.param.segment_elements);
  }
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

std::unique_ptr<kernels::Codec> make_codec(const std::string& spec) {
  auto params = kernels::parse_codec_spec(spec);
  EXPECT_TRUE(params.ok()) << params.status().to_string();
  auto codec = kernels::make_cpu_codec(*params);
  EXPECT_TRUE(codec.ok()) << codec.status().to_string();
  return std::move(codec).value();
}

// The sum of a node's residuals, placed where their chunks lie in the tensor.
std::vector<double> residual_of(const TensorStreams& streams, size_t elements) {
  std::vector<double> total(elements, 0.0);
  for (size_t c = 0; c < streams.streams.size(); ++c) {
    const auto residual = std::as_const(*streams.streams[c]).residual();
    for (size_t i = 0; i < residual.size(); ++i) total[streams.chunks[c].offset + i] += residual[i];
  }
  return total;
}

class AllreduceTest : public ::testing::TestWithParam<Case> {};

TEST_P(AllreduceTest, BitIdenticalAndErrorFeedbackExact) {
  const Case& param = GetParam();
  Cluster cluster(param.nodes, std::chrono::milliseconds(20000));
  ASSERT_TRUE(cluster.wait_connected());
  auto codec = make_codec(param.spec);
  auto algorithm = choose_algorithm(*codec, param.mode, param.nodes, param.elements);
  ASSERT_TRUE(algorithm.ok()) << algorithm.status().to_string();

  kernels::TensorDesc desc;
  desc.job_id = 42;
  desc.tensor_id = 1234;
  desc.elements = param.elements;
  desc.rows = param.rows;
  desc.cols = param.cols;
  std::vector<TensorStreams> streams;
  for (uint32_t rank = 0; rank < param.nodes; ++rank) {
    auto made =
        make_tensor_streams(*codec, desc, *algorithm, param.nodes, rank, param.segment_elements);
    ASSERT_TRUE(made.ok()) << made.status().to_string();
    streams.push_back(std::move(made).value());
  }

  constexpr int kSteps = 20;
  std::vector<double> input_sum(param.elements, 0.0);
  std::vector<double> output_sum(param.elements, 0.0);
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int step = 0; step < kSteps; ++step) {
    std::vector<std::vector<float>> data(param.nodes, std::vector<float>(param.elements));
    for (auto& node : data) {
      for (size_t i = 0; i < node.size(); ++i) {
        node[i] = normal(random);
        input_sum[i] += node[i];
      }
    }
    std::vector<Status> results(param.nodes);
    cluster.on_every_node([&](uint32_t rank) {
      AllreduceOp op{1234,          static_cast<uint64_t>(step), {}, data[rank], codec.get(),
                     &streams[rank]};
      auto report = cluster.node(rank).engine->allreduce(op);
      results[rank] = report.status();
    });
    for (uint32_t rank = 0; rank < param.nodes; ++rank) {
      ASSERT_TRUE(results[rank].ok()) << "gateway " << rank << ": " << results[rank].to_string();
      ASSERT_EQ(0, std::memcmp(data[0].data(), data[rank].data(), param.elements * 4))
          << "gateway " << rank << " differs from gateway 0 at step " << step;
    }
    for (size_t i = 0; i < param.elements; ++i) output_sum[i] += data[0][i];
  }

  std::vector<double> residual_sum(param.elements, 0.0);
  for (uint32_t rank = 0; rank < param.nodes; ++rank) {
    const auto residual = residual_of(streams[rank], param.elements);
    for (size_t i = 0; i < param.elements; ++i) residual_sum[i] += residual[i];
    if (streams[rank].owner_stream) {
      const auto owner = std::as_const(*streams[rank].owner_stream).residual();
      const size_t offset = streams[rank].chunks[rank].offset;
      for (size_t i = 0; i < owner.size(); ++i) residual_sum[offset + i] += owner[i];
    }
  }
  double worst = 0.0;
  for (size_t i = 0; i < param.elements; ++i) {
    const double error = std::abs(output_sum[i] + residual_sum[i] - input_sum[i]);
    worst = std::max(worst, error / (1.0 + std::abs(input_sum[i])));
  }
  EXPECT_LT(worst, param.tolerance) << "sum of outputs + residuals drifts from the sum of inputs";
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, AllreduceTest,
    ::testing::Values(
        Case{"none", CollectiveMode::kAuto, 2, 10007},
        Case{"none", CollectiveMode::kAuto, 4, 10007},
        Case{"fp16", CollectiveMode::kAuto, 3, 10007, 0, 0, 1e-2},
        Case{"bf16", CollectiveMode::kAuto, 4, 10007, 0, 0, 0.12},
        Case{"qsgd:bits=8,workers=8", CollectiveMode::kAuto, 4, 10007},
        Case{"qsgd:bits=4,workers=4", CollectiveMode::kAllGather, 4, 10007},
        // More gateways than a qsgd sum holds: all-gather, each frame decoded on its own.
        Case{"qsgd:bits=4,workers=2", CollectiveMode::kAuto, 3, 10007},
        Case{"qsgd:bits=8,workers=2", CollectiveMode::kAllGather, 4, 10007},
        Case{"sign", CollectiveMode::kAuto, 3, 10007},
        Case{"topk:density=0.01", CollectiveMode::kAuto, 4, 10007},
        Case{"topk:density=0.01,select=exact", CollectiveMode::kAuto, 2, 10007},
        Case{"topk:density=0.01", CollectiveMode::kAggregator, 4, 10007},
        Case{"topk:density=0.01,overlap=0.5", CollectiveMode::kAggregator, 4, 10007},
        Case{"sign", CollectiveMode::kAggregator, 2, 10007},
        Case{"randomk:density=0.05", CollectiveMode::kAuto, 3, 10007},
        Case{"powersgd:rank=4", CollectiveMode::kAuto, 2, 100 * 101, 100, 101},
        Case{"none", CollectiveMode::kAllGather, 3, 5},
        // Parts cut into segments that stream through the ring or all-gather.
        Case{"none", CollectiveMode::kAuto, 3, 10007, 0, 0, 2e-3, 1000},
        Case{"fp16", CollectiveMode::kAuto, 2, 10007, 0, 0, 1e-2, 997},
        Case{"qsgd:bits=8,workers=8", CollectiveMode::kAuto, 4, 10007, 0, 0, 2e-3, 512},
        Case{"sign", CollectiveMode::kAuto, 3, 10007, 0, 0, 2e-3, 2500},
        Case{"topk:density=0.01", CollectiveMode::kAuto, 3, 10007, 0, 0, 2e-3, 2000},
        Case{"randomk:density=0.05", CollectiveMode::kAuto, 2, 10007, 0, 0, 2e-3, 3000},
        Case{"powersgd:rank=4", CollectiveMode::kAuto, 2, 100 * 101, 100, 101, 2e-3, 1000}),
    case_name);

// The chunks of a segmented tensor: every part cut alike, in order, covering the tensor once;
// never more segments than the smallest part has elements; none for multi-round codecs or the
// aggregator.
TEST(TensorStreamsTest, SegmentsCutEveryPartAlike) {
  kernels::TensorDesc desc;
  desc.elements = 10007;
  auto none = make_codec("none");
  auto ring = make_tensor_streams(*none, desc, Algorithm::kRing, 3, 0, 1000);
  ASSERT_TRUE(ring.ok());
  EXPECT_EQ(ring->segments, 4u);  // parts of 3336, 3336, 3335
  ASSERT_EQ(ring->chunks.size(), 12u);
  size_t offset = 0;
  for (const Chunk& chunk : ring->chunks) {
    EXPECT_EQ(chunk.offset, offset);
    EXPECT_LE(chunk.elements, 1000u);
    offset += chunk.elements;
  }
  EXPECT_EQ(offset, desc.elements);
  EXPECT_EQ(ring->chunks[ring->chunk_of(1, 0)].offset, 3336u);  // part 1 starts where it did

  auto tiny =
      make_tensor_streams(*none, kernels::TensorDesc{.elements = 6}, Algorithm::kRing, 3, 0, 1);
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->segments, 2u);  // 2 elements per part: no empty segment

  auto uncut = make_tensor_streams(*none, desc, Algorithm::kRing, 3, 0, 0);
  ASSERT_TRUE(uncut.ok());
  EXPECT_EQ(uncut->segments, 1u);
  EXPECT_EQ(uncut->chunks.size(), 3u);

  auto topk = make_codec("topk:density=0.01");
  auto aggregator = make_tensor_streams(*topk, desc, Algorithm::kAggregator, 2, 0, 1000);
  ASSERT_TRUE(aggregator.ok());
  EXPECT_EQ(aggregator->segments, 1u);
  auto gathered = make_tensor_streams(*topk, desc, Algorithm::kAllGather, 2, 0, 1000);
  ASSERT_TRUE(gathered.ok());
  EXPECT_EQ(gathered->segments, 11u);

  desc.rows = 100;
  desc.cols = 100;
  desc.elements = 10000;
  auto powersgd = make_codec("powersgd:rank=4");
  auto shaped = make_tensor_streams(*powersgd, desc, Algorithm::kAllGather, 2, 0, 1000);
  ASSERT_TRUE(shaped.ok());
  EXPECT_EQ(shaped->segments, 1u);
}

// Lossless frames: cutting the parts into segments changes no bit of the result (each element is
// still summed in the same ring order).
TEST(AllreduceSegmentsTest, LosslessResultIndependentOfSegments) {
  constexpr uint32_t kNodes = 3;
  constexpr size_t kElements = 30011;
  Cluster cluster(kNodes, std::chrono::milliseconds(20000));
  ASSERT_TRUE(cluster.wait_connected());
  auto codec = make_codec("none");
  kernels::TensorDesc desc;
  desc.tensor_id = 9;
  desc.elements = kElements;
  std::mt19937 random(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> input(kNodes, std::vector<float>(kElements));
  for (auto& node : input) {
    for (float& v : node) v = normal(random);
  }
  std::vector<std::vector<float>> results;
  uint64_t seq = 0;
  for (size_t segment_elements : {size_t{0}, size_t{1024}}) {
    std::vector<TensorStreams> streams;
    for (uint32_t rank = 0; rank < kNodes; ++rank) {
      streams.push_back(std::move(make_tensor_streams(*codec, desc, Algorithm::kRing, kNodes, rank,
                                                      segment_elements))
                            .value());
    }
    auto data = input;
    cluster.on_every_node([&](uint32_t rank) {
      AllreduceOp op{9, seq, {}, data[rank], codec.get(), &streams[rank]};
      auto report = cluster.node(rank).engine->allreduce(op);
      EXPECT_TRUE(report.ok()) << report.status().to_string();
    });
    ++seq;
    results.push_back(data[0]);
  }
  EXPECT_EQ(0, std::memcmp(results[0].data(), results[1].data(), kElements * sizeof(float)));
}

// Ring sums a frame of every gateway: only codecs whose sum holds that many can run it, and auto
// gives the others all-gather.
TEST(ChooseAlgorithmTest, RingOnlyForCodecsWhoseSumHoldsEveryGateway) {
  const auto qsgd = make_codec("qsgd:bits=4,workers=2");
  EXPECT_EQ(qsgd->max_summands(), 2u);
  EXPECT_EQ(*choose_algorithm(*qsgd, CollectiveMode::kAuto, 2, 100), Algorithm::kRing);
  EXPECT_EQ(*choose_algorithm(*qsgd, CollectiveMode::kAuto, 3, 100), Algorithm::kAllGather);
  const auto ring = choose_algorithm(*qsgd, CollectiveMode::kRing, 3, 100);
  ASSERT_FALSE(ring.ok());
  EXPECT_EQ(ring.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(ring.status().message().find("sums the frames of all 3 gateways"), std::string::npos)
      << ring.status().message();
  EXPECT_EQ(make_codec("topk:density=0.01")->max_summands(), 1u);
  EXPECT_EQ(*choose_algorithm(*make_codec("fp16"), CollectiveMode::kRing, 1000, 2000),
            Algorithm::kRing);
}

TEST(AllreduceTest, SingleGatewayReturnsItsInput) {
  Cluster cluster(1, std::chrono::milliseconds(1000));
  auto codec = make_codec("topk:density=0.01");
  kernels::TensorDesc desc;
  desc.elements = 100;
  auto streams = make_tensor_streams(*codec, desc, Algorithm::kLocal, 1, 0);
  ASSERT_TRUE(streams.ok());
  std::vector<float> data(100, 1.5f);
  auto report = cluster.node(0).engine->allreduce({1, 0, {}, data, codec.get(), &*streams});
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->wire_bytes, 0u);
  EXPECT_EQ(data, std::vector<float>(100, 1.5f));
}

// Aggregator mode with a codec that quantises against a scale: the owner re-compresses a sum of
// every gateway's values, which can reach nodes x the agreed scale (the largest single value).
// Aligned gradients must come back summed, not clipped at that scale (the rest in the owner's
// residual).
TEST(AllreduceTest, AggregatorKeepsTheSumOfAlignedGradientsAboveTheAgreedScale) {
  constexpr uint32_t kNodes = 3;
  constexpr size_t kElements = 3000;
  Cluster cluster(kNodes, std::chrono::milliseconds(20000));
  ASSERT_TRUE(cluster.wait_connected());
  auto codec = make_codec("qsgd:bits=8,workers=4");
  kernels::TensorDesc desc{.job_id = 42, .tensor_id = 78, .elements = kElements};
  std::vector<TensorStreams> streams;
  for (uint32_t rank = 0; rank < kNodes; ++rank) {
    auto made = make_tensor_streams(*codec, desc, Algorithm::kAggregator, kNodes, rank);
    ASSERT_TRUE(made.ok()) << made.status().to_string();
    streams.push_back(std::move(made).value());
  }
  std::vector<float> gradient(kElements);
  for (size_t i = 0; i < kElements; ++i) gradient[i] = 1.0f + static_cast<float>(i) / kElements;
  std::vector<std::vector<float>> data(kNodes, gradient);
  cluster.on_every_node([&](uint32_t rank) {
    AllreduceOp op{78, 0, {}, data[rank], codec.get(), &streams[rank]};
    const auto report = cluster.node(rank).engine->allreduce(op);
    EXPECT_TRUE(report.ok()) << report.status().to_string();
  });
  double mean_error = 0.0;
  for (size_t i = 0; i < kElements; ++i) mean_error += data[0][i] - kNodes * gradient[i];
  mean_error /= kElements;
  // Stochastic rounding is unbiased: the mean error is a small fraction of a level; clipped at
  // the agreed scale (2) the sums (3 to 6) would lose 2.5 on average.
  EXPECT_LT(std::abs(mean_error), 0.05) << "first element " << data[0][0];
}

// Aggregator mode: the union of the workers' top-k indices, summed over `steps` steps after the
// first (when there is no last aggregate to aim at yet). Each node's gradient is a component all
// nodes share plus as much noise of its own, as data-parallel gradients are.
uint64_t union_after_first_step(const std::string& spec, int steps) {
  constexpr uint32_t kNodes = 4;
  constexpr size_t kElements = 40000;
  Cluster cluster(kNodes, std::chrono::milliseconds(20000));
  EXPECT_TRUE(cluster.wait_connected());
  auto codec = make_codec(spec);
  kernels::TensorDesc desc;
  desc.job_id = 42;
  desc.tensor_id = 77;
  desc.elements = kElements;
  std::vector<TensorStreams> streams;
  for (uint32_t rank = 0; rank < kNodes; ++rank) {
    streams.push_back(
        std::move(make_tensor_streams(*codec, desc, Algorithm::kAggregator, kNodes, rank)).value());
  }
  std::mt19937 random(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  uint64_t union_elements = 0;
  for (int step = 0; step <= steps; ++step) {
    std::vector<float> shared(kElements);
    for (float& v : shared) v = normal(random);
    std::vector<std::vector<float>> data(kNodes, shared);
    for (auto& node : data) {
      for (float& v : node) v += normal(random);
    }
    std::vector<uint64_t> unions(kNodes);
    cluster.on_every_node([&](uint32_t rank) {
      AllreduceOp op{77, static_cast<uint64_t>(step), {}, data[rank], codec.get(), &streams[rank]};
      auto report = cluster.node(rank).engine->allreduce(op);
      EXPECT_TRUE(report.ok()) << report.status().to_string();
      if (report.ok()) unions[rank] = report->union_elements;
    });
    if (step > 0) {
      for (uint64_t u : unions) union_elements += u;
    }
  }
  return union_elements;
}

TEST(AggregatorOverlap, OverlapSeekingSelectionShrinksTheUnion) {
  const uint64_t plain = union_after_first_step("topk:density=0.01", 8);
  const uint64_t seeking = union_after_first_step("topk:density=0.01,overlap=0.5", 8);
  // 4 workers, k = 400 per worker: a union between k and 4k per chunk owner and step.
  ASSERT_GT(plain, 0u);
  std::cout << "union: plain " << plain << ", overlap-seeking " << seeking << "\n";
  EXPECT_LT(static_cast<double>(seeking), 0.85 * static_cast<double>(plain))
      << "union with overlap-seeking selection " << seeking << " vs plain top-k " << plain;
}

}  // namespace
}  // namespace gradgate::gateway
