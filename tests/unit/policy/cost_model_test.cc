#include "control/policy/cost_model.h"

#include <gtest/gtest.h>

#include "gradgate/kernels/frame.h"

namespace gradgate::control {
namespace {

const TensorSample kTensor{.name = "w", .elements = 1u << 20, .rows = 0, .cols = 0};
constexpr double kRawBytes = 4.0 * (1u << 20);

kernels::CodecParams codec(const std::string& spec) {
  auto params = kernels::parse_codec_spec(spec);
  EXPECT_TRUE(params.ok());
  return params.ok() ? *params : kernels::CodecParams{};
}

size_t frame_bytes(const std::string& spec) {
  auto made = kernels::make_cpu_codec(codec(spec));
  EXPECT_TRUE(made.ok());
  return made.ok() ? (*made)->max_frame_bytes({.elements = kTensor.elements}) : 0;
}

TEST(CostModel, SummableCodecsPayTheRingShare) {
  const CostModel model(4, 1e9, {}, 1e9);
  auto dense = model.cost(codec("none"), kTensor);
  ASSERT_TRUE(dense.ok());
  const double frame = kernels::kFrameHeaderBytes + kRawBytes;
  EXPECT_DOUBLE_EQ(dense->wire_bytes, 2.0 * 3.0 / 4.0 * frame);
  EXPECT_DOUBLE_EQ(dense->wire_seconds, dense->wire_bytes / 1e9);
}

// Codec none sends a 16-bit tensor in its own dtype: half the bytes; other codecs do not care.
TEST(CostModel, NoneSendsASixteenBitTensorInItsOwnDtype) {
  const CostModel model(4, 1e9, {}, 1e9);
  TensorSample bf16 = kTensor;
  bf16.dtype = Dtype::kBf16;
  auto dense = model.cost(codec("none"), bf16);
  ASSERT_TRUE(dense.ok());
  EXPECT_DOUBLE_EQ(dense->wire_bytes, 2.0 * 3.0 / 4.0 * frame_bytes("bf16:ef=0"));
  EXPECT_DOUBLE_EQ(frame_bytes("bf16:ef=0"), kernels::kFrameHeaderBytes + kRawBytes / 2);
  TensorSample fp16 = kTensor;
  fp16.dtype = Dtype::kFp16;
  EXPECT_DOUBLE_EQ(model.cost(codec("none"), fp16)->wire_bytes, dense->wire_bytes);
  EXPECT_DOUBLE_EQ(frame_bytes("fp16:ef=0"), frame_bytes("bf16:ef=0"));
  EXPECT_DOUBLE_EQ(model.cost(codec("topk:density=0.01"), bf16)->wire_bytes,
                   model.cost(codec("topk:density=0.01"), kTensor)->wire_bytes);
}

TEST(CostModel, OtherCodecsSendTheirFrameToEveryPeerAndDecodeEveryFrame) {
  const CostModel model(
      4, 2e9, {{.codec = "topk", .encode_bytes_per_second = 4e9, .decode_bytes_per_second = 8e9}},
      1e9);
  auto topk = model.cost(codec("topk:density=0.01"), kTensor);
  ASSERT_TRUE(topk.ok());
  EXPECT_DOUBLE_EQ(topk->wire_bytes, 3.0 * frame_bytes("topk:density=0.01"));
  EXPECT_DOUBLE_EQ(topk->wire_seconds, topk->wire_bytes / 2e9);
  EXPECT_DOUBLE_EQ(topk->codec_seconds, kRawBytes / 4e9 + 4 * kRawBytes / 8e9);
}

TEST(CostModel, UnmeasuredCodecsRunAtTheDefaultSpeed) {
  const CostModel model(2, 1e9, {}, 5e8);
  auto fp16 = model.cost(codec("fp16"), kTensor);
  ASSERT_TRUE(fp16.ok());
  EXPECT_DOUBLE_EQ(fp16->codec_seconds, 2 * kRawBytes / 5e8);
}

TEST(CostModel, PowersgdUsesTheTensorShape) {
  const CostModel model(2, 1e9, {}, 1e9);
  const TensorSample matrix{.name = "m", .elements = 1u << 20, .rows = 1u << 10, .cols = 1u << 10};
  const TensorSample tall{.name = "t", .elements = 1u << 20, .rows = 1u << 16, .cols = 1u << 4};
  auto square = model.cost(codec("powersgd:rank=4"), matrix);
  auto thin = model.cost(codec("powersgd:rank=4"), tall);
  ASSERT_TRUE(square.ok() && thin.ok());
  EXPECT_LT(square->wire_bytes, thin->wire_bytes);
}

TEST(CostModel, ASingleNodeSendsNothing) {
  const CostModel model(1, 1e9, {}, 1e9);
  auto dense = model.cost(codec("none"), kTensor);
  ASSERT_TRUE(dense.ok());
  EXPECT_EQ(dense->wire_bytes, 0.0);
}

TEST(CostModel, TheSlowestLinkIsTheBottleneck) {
  Measurements m;
  m.nodes = 3;
  EXPECT_FALSE(CostModel::for_job(m, 1e9));
  m.links = {{.from_node = 0, .to_node = 1, .goodput_bytes_per_second = 5e9, .rtt_seconds = 0},
             {.from_node = 1, .to_node = 2, .goodput_bytes_per_second = 2e8, .rtt_seconds = 0},
             {.from_node = 2, .to_node = 0, .goodput_bytes_per_second = 1e9, .rtt_seconds = 0}};
  const auto model = CostModel::for_job(m, 1e9);
  ASSERT_TRUE(model);
  EXPECT_EQ(model->bottleneck_goodput(), 2e8);
}

}  // namespace
}  // namespace gradgate::control
