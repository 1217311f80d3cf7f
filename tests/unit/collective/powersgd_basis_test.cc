// powersgd through the all-gather keeps its first, shared random basis Q (all_gather.cc says
// why): every step equals the codec's two rounds with round 0's sum absorbed and round 1's sum
// only decoded. Absorbing round 1 as well (a warm start) departs from it at the second step.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "cluster.h"
#include "codec_test_util.h"
#include "gradgate/kernels/codec_spec.h"

namespace gradgate::gateway {
namespace {

namespace util = kernels::test_util;
using testing::Cluster;

// The codec's step for two workers, round 1 not absorbed: what each worker decodes.
std::vector<std::vector<float>> step_with_first_basis(
    const kernels::Codec& codec, std::vector<std::unique_ptr<kernels::Stream>>& streams,
    const std::vector<std::vector<float>>& grads, kernels::StepContext ctx) {
  std::vector<util::Bytes> sums;
  for (int round = 0; round < 2; ++round) {
    std::vector<util::Bytes> frames;
    for (uint32_t w = 0; w < 2; ++w) {
      ctx.worker = w;
      frames.push_back(
          std::move(util::encode_frame(codec, round, ctx, grads[w], *streams[w])).value());
    }
    sums.push_back(std::move(util::add_frame_bytes(codec, frames[0], frames[1])).value());
    if (round == 0) {
      const auto summed = kernels::parse_frame(sums.back());
      for (auto& stream : streams) EXPECT_TRUE(codec.absorb(0, *summed, *stream).ok());
    }
  }
  std::vector<std::vector<float>> decoded(2, std::vector<float>(grads[0].size(), 0.0f));
  for (uint32_t w = 0; w < 2; ++w) {
    EXPECT_TRUE(util::decode_frame(codec, sums[1], streams[w].get(), decoded[w]).ok());
  }
  return decoded;
}

TEST(AllGatherPowersgd, KeepsItsFirstBasisStepAfterStep) {
  constexpr uint32_t kNodes = 2;
  Cluster cluster(kNodes, std::chrono::milliseconds(20000));
  ASSERT_TRUE(cluster.wait_connected());
  auto params = kernels::parse_codec_spec("powersgd:rank=2");
  ASSERT_TRUE(params.ok());
  auto codec = std::move(kernels::make_cpu_codec(*params)).value();
  const kernels::TensorDesc desc{
      .job_id = 1, .tensor_id = 77, .elements = 40 * 30, .rows = 40, .cols = 30};
  std::vector<TensorStreams> gateway_streams;
  for (uint32_t rank = 0; rank < kNodes; ++rank) {
    gateway_streams.push_back(
        std::move(make_tensor_streams(*codec, desc, Algorithm::kAllGather, kNodes, rank, 0))
            .value());
  }
  auto reference_streams = std::move(util::make_streams(*codec, desc, kNodes)).value();

  std::mt19937 random(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (uint64_t step = 0; step < 4; ++step) {
    std::vector<std::vector<float>> data(kNodes, std::vector<float>(desc.elements));
    for (auto& node : data) {
      for (float& value : node) value = normal(random);
    }
    const auto expected = step_with_first_basis(*codec, reference_streams, data,
                                                {.step = step, .job_seed = testing::kJobId});
    std::vector<Status> results(kNodes);
    cluster.on_every_node([&](uint32_t rank) {
      AllreduceOp op{77, step, {}, data[rank], codec.get(), &gateway_streams[rank]};
      results[rank] = cluster.node(rank).engine->allreduce(op).status();
    });
    for (uint32_t rank = 0; rank < kNodes; ++rank) {
      ASSERT_TRUE(results[rank].ok()) << results[rank].to_string();
      ASSERT_EQ(
          0, std::memcmp(data[rank].data(), expected[rank].data(), desc.elements * sizeof(float)))
          << "gateway " << rank << " departs from the first basis at step " << step;
    }
  }
}

}  // namespace
}  // namespace gradgate::gateway
