// powersgd through the all-gather, step after step, is the codec's own two-round protocol
// (codec.h): every round's sum is absorbed, the last one too, so that each step's Q warm-starts
// the next one's power iteration. Reference: run_step of the codec tests, on streams of its own.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "cluster.h"
#include "codec_test_util.h"
#include "gradgate/kernels/codec_spec.h"

namespace gradgate::gateway {
namespace {

using testing::Cluster;

TEST(AllGatherPowersgd, EveryStepEqualsTheCodecsOwnTwoRoundStep) {
  constexpr uint32_t kNodes = 2;
  constexpr size_t kRows = 40, kCols = 30;
  Cluster cluster(kNodes, std::chrono::milliseconds(20000));
  ASSERT_TRUE(cluster.wait_connected());
  auto params = kernels::parse_codec_spec("powersgd:rank=2");
  ASSERT_TRUE(params.ok());
  auto codec = kernels::make_cpu_codec(*params);
  ASSERT_TRUE(codec.ok());

  kernels::TensorDesc desc{
      .job_id = 1, .tensor_id = 77, .elements = kRows * kCols, .rows = kRows, .cols = kCols};
  std::vector<TensorStreams> gateway_streams;
  for (uint32_t rank = 0; rank < kNodes; ++rank) {
    auto made = make_tensor_streams(**codec, desc, Algorithm::kAllGather, kNodes, rank, 0);
    ASSERT_TRUE(made.ok()) << made.status().to_string();
    gateway_streams.push_back(std::move(made).value());
  }
  auto reference_streams = kernels::test_util::make_streams(**codec, desc, kNodes);
  ASSERT_TRUE(reference_streams.ok());

  std::mt19937 random(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (uint64_t step = 0; step < 6; ++step) {
    std::vector<std::vector<float>> data(kNodes, std::vector<float>(desc.elements));
    for (auto& node : data) {
      for (float& value : node) value = normal(random);
    }
    kernels::StepContext ctx{.step = step, .job_seed = testing::kJobId};
    auto reference = kernels::test_util::run_step(
        **codec, kernels::test_util::stream_pointers(*reference_streams), data, ctx);
    ASSERT_TRUE(reference.ok()) << reference.status().to_string();

    std::vector<Status> results(kNodes);
    cluster.on_every_node([&](uint32_t rank) {
      AllreduceOp op{77, step, 0, data[rank], codec->get(), &gateway_streams[rank]};
      results[rank] = cluster.node(rank).engine->allreduce(op).status();
    });
    for (uint32_t rank = 0; rank < kNodes; ++rank) {
      ASSERT_TRUE(results[rank].ok()) << results[rank].to_string();
      ASSERT_EQ(0, std::memcmp(data[rank].data(), reference->decoded[rank].data(),
                               desc.elements * sizeof(float)))
          << "gateway " << rank << " departs from the codec's protocol at step " << step;
    }
  }
}

}  // namespace
}  // namespace gradgate::gateway
