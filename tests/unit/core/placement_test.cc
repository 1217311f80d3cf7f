// Where a tensor's codec runs (placement.h): host buffers always on the CPU without a probe;
// GPU buffers by compression.placement, `auto` by what the prober measures (here a prober that
// answers given rates, so that each decision is checked); the probe's sample (placement_probe.h).
// The decisions that need a CUDA codec skip without a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gateway/gpu/placement.h"
#include "gradgate/kernels/device_ops.h"

namespace gradgate::gateway {
namespace {

using ::testing::HasSubstr;

// A prober that answers `probe` (or `failure`) and counts its calls.
struct Prober {
  Result<PlacementProbe> answer = PlacementProbe{2e9, 1e9};
  int calls = 0;
  PlacementProber function() {
    return [this](const kernels::Codec& gpu, const kernels::Codec& cpu) {
      ++calls;
      EXPECT_EQ(gpu.spec(), cpu.spec());
      return answer;
    };
  }
};

bool gpu_usable() { return kernels::DeviceQueue::create(0).ok(); }

Result<Placement> place(const std::string& spec, bool gpu_buffers, PlacementMode preference,
                        Prober& prober, CollectiveMode mode = CollectiveMode::kAuto) {
  return place_codec(spec, gpu_buffers, mode, 2, 100000, preference, prober.function());
}

TEST(PlacementTest, HostBuffersRunOnTheCpuWithoutAProbe) {
  Prober prober;
  auto placed = place("fp16", false, PlacementMode::kAuto, prober);
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  EXPECT_FALSE(placed->on_gpu);
  EXPECT_EQ(placed->codec->spec(), "fp16");
  EXPECT_EQ(placed->host_codec, nullptr);
  EXPECT_EQ(placed->cpu_reason, "");
  EXPECT_EQ(prober.calls, 0);
}

TEST(PlacementTest, NoCodecIsAnError) {
  Prober prober;
  auto placed = place("zip", true, PlacementMode::kAuto, prober);
  EXPECT_EQ(placed.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(prober.calls, 0);
}

TEST(PlacementTest, WithoutAGpuGpuBuffersRunOnTheCpuAndSayWhy) {
  if (gpu_usable()) GTEST_SKIP() << "a GPU is usable here";
  Prober prober;
  auto placed = place("fp16", true, PlacementMode::kAuto, prober);
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  EXPECT_FALSE(placed->on_gpu);
  EXPECT_THAT(placed->cpu_reason, HasSubstr("CUDA"));
  EXPECT_EQ(prober.calls, 0);
}

class GpuPlacementDecisionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu_usable()) GTEST_SKIP() << "no usable GPU";
  }
  Prober prober_;
};

TEST_F(GpuPlacementDecisionTest, GpuPreferenceTakesTheGpuWithoutAProbe) {
  auto placed = place("fp16", true, PlacementMode::kGpu, prober_);
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  EXPECT_TRUE(placed->on_gpu);
  ASSERT_NE(placed->host_codec, nullptr);
  EXPECT_EQ(placed->host_codec->spec(), "fp16");
  EXPECT_EQ(prober_.calls, 0);
}

TEST_F(GpuPlacementDecisionTest, CpuPreferenceStagesThroughTheHost) {
  auto placed = place("fp16", true, PlacementMode::kCpu, prober_);
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  EXPECT_FALSE(placed->on_gpu);
  EXPECT_THAT(placed->cpu_reason, HasSubstr("compression.placement is cpu"));
  EXPECT_EQ(prober_.calls, 0);
}

TEST_F(GpuPlacementDecisionTest, AutoTakesTheFasterSide) {
  auto gpu_faster = place("fp16", true, PlacementMode::kAuto, prober_);
  ASSERT_TRUE(gpu_faster.ok());
  EXPECT_TRUE(gpu_faster->on_gpu);
  ASSERT_TRUE(gpu_faster->probe.has_value());
  EXPECT_EQ(gpu_faster->probe->gpu_elements_per_second, 2e9);

  prober_.answer = PlacementProbe{1e9, 3e9};
  auto cpu_faster = place("fp16", true, PlacementMode::kAuto, prober_);
  ASSERT_TRUE(cpu_faster.ok());
  EXPECT_FALSE(cpu_faster->on_gpu);
  EXPECT_THAT(cpu_faster->cpu_reason, HasSubstr("measured faster on the CPU (3e+09 vs 1e+09"));
  EXPECT_EQ(prober_.calls, 2);
}

TEST_F(GpuPlacementDecisionTest, AutoKeepsTheGpuWhenTheProbeFails) {
  prober_.answer = Status(ErrorCode::kResourceExhausted, "out of memory");
  auto placed = place("fp16", true, PlacementMode::kAuto, prober_);
  ASSERT_TRUE(placed.ok());
  EXPECT_TRUE(placed->on_gpu);
  EXPECT_THAT(placed->probe_error, HasSubstr("out of memory"));
}

// Gateways that measured differently must still decode powersgd alike: no probe, the GPU.
TEST_F(GpuPlacementDecisionTest, PowersgdIsNotProbedAndStaysOnTheGpu) {
  prober_.answer = PlacementProbe{1e9, 3e9};
  auto placed = place("powersgd:rank=4", true, PlacementMode::kAuto, prober_);
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  EXPECT_TRUE(placed->on_gpu);
  EXPECT_EQ(prober_.calls, 0);
}

TEST_F(GpuPlacementDecisionTest, WhatOnlyTheCpuRunsIsNotProbed) {
  auto aggregated =
      place("topk:density=0.01", true, PlacementMode::kAuto, prober_, CollectiveMode::kAggregator);
  ASSERT_TRUE(aggregated.ok());
  EXPECT_FALSE(aggregated->on_gpu);
  EXPECT_THAT(aggregated->cpu_reason, HasSubstr("aggregator"));
  EXPECT_EQ(prober_.calls, 0);
}

TEST(PlacementProbeTest, SampleIsTheTensorUpToTheProbeSizeAndKeepsColumns) {
  kernels::TensorDesc small{.elements = 1000};
  EXPECT_EQ(probe_sample(small).elements, 1000u);

  kernels::TensorDesc large{.elements = 25'000'000};
  EXPECT_EQ(probe_sample(large).elements, kProbeElements);

  kernels::TensorDesc matrix{.elements = 4096 * 4096, .rows = 4096, .cols = 4096};
  const auto sample = probe_sample(matrix);
  EXPECT_EQ(sample.cols, 4096u);
  EXPECT_EQ(sample.rows, kProbeElements / 4096);
  EXPECT_EQ(sample.elements, sample.rows * sample.cols);

  kernels::TensorDesc wide{
      .elements = 2 * (kProbeElements + 1), .rows = 2, .cols = kProbeElements + 1};
  EXPECT_EQ(probe_sample(wide).rows, 1u);  // never fewer than one row
}

}  // namespace
}  // namespace gradgate::gateway
