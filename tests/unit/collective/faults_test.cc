// Failures during a collective end every gateway's wait with an error, early where a cause is
// known (an abort from a peer, a lost connection) and at the timeout otherwise; a malformed frame
// is an error, not a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <new>

#include "cluster.h"
#include "gateway/collective/envelope.h"
#include "gradgate/kernels/codec_spec.h"

namespace gradgate::gateway {
namespace {

using testing::Cluster;
using Seconds = std::chrono::duration<double>;

struct TwoGateways {
  /// `started`: as Cluster's (1: gateway 1's transport starts later).
  explicit TwoGateways(std::chrono::milliseconds timeout, const std::string& spec = "none",
                       uint32_t started = 2)
      : cluster(2, timeout, started) {
    auto params = kernels::parse_codec_spec(spec);
    codec = std::move(kernels::make_cpu_codec(*params)).value();
    kernels::TensorDesc desc;
    desc.tensor_id = 9;
    desc.elements = 1000;
    auto algorithm = choose_algorithm(*codec, CollectiveMode::kAuto, 2, 1000);
    for (uint32_t rank = 0; rank < 2; ++rank) {
      streams.push_back(std::move(make_tensor_streams(*codec, desc, *algorithm, 2, rank)).value());
      data.emplace_back(1000, 1.0f);
    }
  }
  AllreduceOp op(uint32_t rank, uint64_t seq) {
    return {9, seq, {}, data[rank], codec.get(), &streams[rank]};
  }
  Result<AllreduceReport> run(uint32_t rank, uint64_t seq = 0) {
    return cluster.node(rank).engine->allreduce(op(rank, seq));
  }

  Cluster cluster;
  std::unique_ptr<kernels::Codec> codec;
  std::vector<TensorStreams> streams;
  std::vector<std::vector<float>> data;
};

// Whichever collective and however the codec meets it (at encode, or in qsgd's agreed scale),
// both gateways learn at once that the step was skipped, not that a gateway failed.
TEST(CollectiveFaults, NonFiniteGradientAbortsThePeerAtOnce) {
  for (const char* spec : {"topk:density=0.01", "qsgd:bits=8,workers=8", "fp16"}) {
    SCOPED_TRACE(spec);
    TwoGateways job(std::chrono::milliseconds(20000), spec);
    ASSERT_TRUE(job.cluster.wait_connected());
    job.data[1][17] = std::numeric_limits<float>::infinity();
    std::vector<Status> results(2);
    const auto start = Clock::now();
    job.cluster.on_every_node([&](uint32_t rank) { results[rank] = job.run(rank).status(); });
    EXPECT_LT(Seconds(Clock::now() - start).count(), 10.0) << "waited for the timeout";
    EXPECT_EQ(results[1].code(), ErrorCode::kNonFiniteGradient) << results[1].to_string();
    EXPECT_EQ(results[0].code(), ErrorCode::kNonFiniteGradient) << results[0].to_string();
    EXPECT_NE(results[0].message().find("gateway 1"), std::string::npos) << results[0].message();
  }
}

// Finite gradients whose sum leaves the range of the codec's numbers (where the adding or the
// decoding finds it): every gateway skips the step, as DDP's all-reduce would overflow to
// infinity; no gateway is blamed for a malformed frame.
TEST(CollectiveFaults, AFiniteSumBeyondTheNumberRangeSkipsTheStepOnEveryGateway) {
  const std::pair<const char*, float> cases[] = {
      {"none", 3e38f}, {"fp16", 40000.0f}, {"qsgd:bits=8,workers=8", 3e38f}};
  for (const auto& [spec, value] : cases) {
    SCOPED_TRACE(spec);
    TwoGateways job(std::chrono::milliseconds(20000), spec);
    ASSERT_TRUE(job.cluster.wait_connected());
    for (auto& node_sum : job.data) node_sum[17] = value;
    std::vector<Status> results(2);
    const auto start = Clock::now();
    job.cluster.on_every_node([&](uint32_t rank) { results[rank] = job.run(rank).status(); });
    EXPECT_LT(Seconds(Clock::now() - start).count(), 10.0) << "waited for the timeout";
    for (const auto& result : results) {
      EXPECT_EQ(result.code(), ErrorCode::kNonFiniteGradient) << result.to_string();
    }
  }
}

// fp16 without a residual (the gateway's codec none for an fp16 tensor): a node sum beyond fp16's
// range skips the step on every gateway, as it would be infinite in DDP's fp16 all-reduce, even
// where the other node's sum would bring the total back within range; sent as 65504 instead, the
// total would be wrong and finite.
TEST(CollectiveFaults, WithoutAResidualAnFp16NodeSumBeyondItsRangeSkipsTheStep) {
  TwoGateways job(std::chrono::milliseconds(20000), "fp16:ef=0");
  ASSERT_TRUE(job.cluster.wait_connected());
  job.data[1][17] = 70000.0f;
  job.data[0][17] = -60000.0f;
  std::vector<Status> results(2);
  job.cluster.on_every_node([&](uint32_t rank) { results[rank] = job.run(rank).status(); });
  for (const auto& result : results) {
    EXPECT_EQ(result.code(), ErrorCode::kNonFiniteGradient) << result.to_string();
  }
  EXPECT_NE(results[1].message().find("beyond the 16-bit format's range"), std::string::npos)
      << results[1].message();
}

// A step skipped for a NaN (mixed-precision training meets them when its loss scale is too high)
// leaves both gateways ready for the next one, which sums as usual.
TEST(CollectiveFaults, AStepSkippedForANonFiniteGradientIsFollowedByAGoodOne) {
  TwoGateways job(std::chrono::milliseconds(20000));
  ASSERT_TRUE(job.cluster.wait_connected());
  job.data[1][17] = std::numeric_limits<float>::infinity();
  std::vector<Status> results(2);
  job.cluster.on_every_node([&](uint32_t rank) { results[rank] = job.run(rank, 0).status(); });
  for (const auto& result : results) {
    ASSERT_EQ(result.code(), ErrorCode::kNonFiniteGradient) << result.to_string();
  }
  // The next step's node sums (a failed step may have left partial sums in these buffers).
  for (auto& node_sum : job.data) std::fill(node_sum.begin(), node_sum.end(), 1.0f);
  job.cluster.on_every_node([&](uint32_t rank) { results[rank] = job.run(rank, 1).status(); });
  for (uint32_t rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(results[rank].ok()) << results[rank].to_string();
    for (const float value : job.data[rank]) ASSERT_EQ(value, 2.0f);
  }
}

// A codec that runs out of memory encoding on gateway 0 (its ctx.worker), as any allocation of a
// frame or sum may: otherwise the codec `inner`.
class OutOfMemoryOnGatewayZero final : public kernels::Codec {
 public:
  explicit OutOfMemoryOnGatewayZero(std::unique_ptr<kernels::Codec> inner)
      : inner_(std::move(inner)) {}
  CodecId id() const override { return inner_->id(); }
  std::string spec() const override { return inner_->spec(); }
  bool summable() const override { return inner_->summable(); }
  Result<std::unique_ptr<kernels::Stream>> make_stream(
      const kernels::TensorDesc& desc) const override {
    return inner_->make_stream(desc);
  }
  size_t max_frame_bytes(const kernels::TensorDesc& desc) const override {
    return inner_->max_frame_bytes(desc);
  }
  Result<size_t> encode(int round, const kernels::StepContext& ctx, std::span<const float> grad,
                        kernels::Stream& stream, std::span<std::byte> out) const override {
    if (ctx.worker == 0) throw std::bad_alloc();
    return inner_->encode(round, ctx, grad, stream, out);
  }
  Status decode_accumulate(const kernels::FrameView& frame, const kernels::Stream* stream,
                           std::span<float> acc) const override {
    return inner_->decode_accumulate(frame, stream, acc);
  }

 private:
  std::unique_ptr<kernels::Codec> inner_;
};

// An exception inside the collective is a failed step like any other: an error on its gateway,
// and an abort that ends the peer's wait at once.
TEST(CollectiveFaults, OutOfMemoryFailsTheStepAndAbortsThePeerAtOnce) {
  TwoGateways job(std::chrono::milliseconds(20000), "topk:density=0.1");
  ASSERT_TRUE(job.cluster.wait_connected());
  job.codec = std::make_unique<OutOfMemoryOnGatewayZero>(std::move(job.codec));
  std::vector<Status> results(2);
  const auto start = Clock::now();
  job.cluster.on_every_node([&](uint32_t rank) { results[rank] = job.run(rank).status(); });
  EXPECT_LT(Seconds(Clock::now() - start).count(), 10.0) << "waited for the timeout";
  EXPECT_EQ(results[0].code(), ErrorCode::kResourceExhausted) << results[0].to_string();
  EXPECT_EQ(results[1].code(), ErrorCode::kAborted) << results[1].to_string();
  EXPECT_NE(results[1].message().find("gateway 0"), std::string::npos) << results[1].message();
}

// A gateway that gives up on a step while a peer is not connected tells that peer once it is: the
// peer's step ends with the reason at once, not at the timeout. (The same path serves an abort
// queued on a link that dropped before it went out.)
TEST(CollectiveFaults, AnAbortReachesAPeerThatWasNotConnectedWhenItWasSent) {
  TwoGateways job(std::chrono::milliseconds(20000), "none", 1);
  const std::string why = "only 1 of the 2 local workers asked for the all-reduce";
  job.cluster.node(1).engine->abort(job.op(1, 0), Status(ErrorCode::kTimeout, why));
  Status result;
  const auto start = Clock::now();
  std::thread waiter([&] { result = job.run(0).status(); });
  job.cluster.start_transport(1);
  waiter.join();
  EXPECT_LT(Seconds(Clock::now() - start).count(), 10.0) << "waited for the timeout";
  EXPECT_EQ(result.code(), ErrorCode::kAborted) << result.to_string();
  EXPECT_NE(result.message().find(why), std::string::npos) << result.message();
  // The abort is about step 0 only: step 1 runs normally on both.
  std::vector<Status> next(2);
  job.cluster.on_every_node([&](uint32_t rank) { next[rank] = job.run(rank, 1).status(); });
  EXPECT_TRUE(next[0].ok()) << next[0].to_string();
  EXPECT_TRUE(next[1].ok()) << next[1].to_string();
}

TEST(CollectiveFaults, AbsentPeerTimesOut) {
  TwoGateways job(std::chrono::milliseconds(300));
  ASSERT_TRUE(job.cluster.wait_connected());
  const auto start = Clock::now();
  auto report = job.run(0);
  const double waited = Seconds(Clock::now() - start).count();
  EXPECT_EQ(report.status().code(), ErrorCode::kTimeout) << report.status().to_string();
  EXPECT_GE(waited, 0.29);
  EXPECT_LT(waited, 5.0);
}

TEST(CollectiveFaults, LostPeerEndsTheWaitEarly) {
  TwoGateways job(std::chrono::milliseconds(20000));
  ASSERT_TRUE(job.cluster.wait_connected());
  Status result;
  std::thread waiter([&] { result = job.run(0).status(); });
  // Gateway 0 has sent its chunk and waits for gateway 1's; then gateway 1 goes away.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (job.cluster.node(1).transport->stats().messages_received == 0 && Clock::now() < deadline) {
    std::this_thread::yield();
  }
  const auto start = Clock::now();
  job.cluster.node(1).transport->stop();
  waiter.join();
  EXPECT_LT(Seconds(Clock::now() - start).count(), 10.0);
  EXPECT_EQ(result.code(), ErrorCode::kUnavailable) << result.to_string();
}

TEST(CollectiveFaults, MalformedFrameIsAnErrorNotACrash) {
  TwoGateways job(std::chrono::milliseconds(20000));
  ASSERT_TRUE(job.cluster.wait_connected());
  // Gateway 1 sends garbage where gateway 0 expects its reduce-scatter chunk.
  std::vector<std::byte> garbage(200, std::byte{0x5a});
  const Envelope envelope{MessageKind::kRingReduce, 1, 9, 0, 0};
  ASSERT_TRUE(
      job.cluster.node(1)
          .transport->send(0, std::make_shared<const MessageBytes>(make_message(envelope, garbage)))
          .ok());
  auto report = job.run(0);
  EXPECT_FALSE(report.ok());
  EXPECT_TRUE(report.status().code() == ErrorCode::kMalformedFrame ||
              report.status().code() == ErrorCode::kChecksumMismatch)
      << report.status().to_string();
}

// powersgd decodes to other bits on the GPU than on the CPU: a frame from a gateway that decodes
// on the other side ends the operation with a reason, instead of workers silently drifting apart.
// Gateway 1's frame is made here, with the flag set as a gateway decoding on the GPU sets it; the
// same frame without the flag is taken (gateway 0 then waits for round 1 until its timeout).
TEST(CollectiveFaults, PowersgdFrameOfAGatewayDecodingOnTheGpuIsRefused) {
  for (const bool gpu : {true, false}) {
    Cluster cluster(2, std::chrono::milliseconds(gpu ? 20000 : 500));
    ASSERT_TRUE(cluster.wait_connected());
    auto params = kernels::parse_codec_spec("powersgd:rank=2");
    auto codec = std::move(kernels::make_cpu_codec(*params)).value();
    kernels::TensorDesc desc;
    desc.tensor_id = 9;
    desc.elements = 40 * 50;
    desc.rows = 40;
    desc.cols = 50;
    auto streams =
        std::move(make_tensor_streams(*codec, desc, Algorithm::kAllGather, 2, 0)).value();
    auto peer_stream = std::move(codec->make_stream(desc)).value();
    std::vector<float> data(desc.elements, 0.5f), peer_data(desc.elements, 0.25f);
    std::vector<std::byte> frame(codec->max_frame_bytes(desc));
    kernels::StepContext step;
    step.worker = 1;
    auto size = codec->encode(0, step, peer_data, *peer_stream, frame);
    ASSERT_TRUE(size.ok()) << size.status().to_string();
    frame.resize(*size);
    Envelope envelope{MessageKind::kGather, 0, 9, 0, 0, {0}};
    envelope.sender_decodes_on_gpu = gpu;
    ASSERT_TRUE(
        cluster.node(1)
            .transport->send(0, std::make_shared<const MessageBytes>(make_message(envelope, frame)))
            .ok());
    auto report = cluster.node(0).engine->allreduce({9, 0, {}, data, codec.get(), &streams});
    if (gpu) {
      EXPECT_EQ(report.status().code(), ErrorCode::kIncompatible) << report.status().to_string();
      EXPECT_NE(report.status().message().find(
                    "gateway 1 decodes powersgd:rank=2 on the GPU, this gateway on the CPU"),
                std::string::npos)
          << report.status().message();
    } else {
      EXPECT_EQ(report.status().code(), ErrorCode::kTimeout) << report.status().to_string();
    }
  }
}

}  // namespace
}  // namespace gradgate::gateway
