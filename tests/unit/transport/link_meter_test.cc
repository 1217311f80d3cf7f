// Link measurement: the meter's median of goodput samples, samples taken on real transfers over
// loopback, and probes that measure an idle link without reaching the handler.
#include <gtest/gtest.h>

#include "gateway/transport/link_meter.h"
#include "tests/unit/transport/transport_test_support.h"

namespace gradgate::gateway::testing {
namespace {

using std::chrono::milliseconds;

TEST(LinkMeterTest, EstimateIsTheMedianOfTheLastSamples) {
  LinkMeter meter;
  const auto t0 = LinkMeter::Clock::now();
  EXPECT_EQ(meter.estimate(3, t0).samples, 0u);
  EXPECT_EQ(meter.estimate(3, t0).goodput_bytes_per_second, 0.0);
  // 1 MiB in 1, 2, 4, 8 and 100 ms: the outlier does not move the median (2 ms... 4 ms).
  constexpr uint64_t kMiB = 1 << 20;
  for (int ms : {1, 2, 4, 8, 100}) meter.add_transfer(kMiB, t0, t0 + milliseconds(ms));
  const LinkEstimate link = meter.estimate(3, t0 + milliseconds(600));
  EXPECT_EQ(link.peer, 3u);
  EXPECT_EQ(link.samples, 5u);
  EXPECT_NEAR(link.goodput_bytes_per_second, kMiB / 0.004, 1.0);
  EXPECT_NEAR(link.age_seconds, 0.5, 1e-6);  // since the last sample ended (at 100 ms)
  // Messages too small to time, and zero durations, are not samples.
  meter.add_transfer(LinkMeter::kMinMeasuredBytes - 1, t0, t0 + milliseconds(1));
  meter.add_transfer(kMiB, t0, t0);
  EXPECT_EQ(meter.estimate(3, t0).samples, 5u);
  // Only the last kSamples count: five fast transfers replace the slow ones.
  for (int i = 0; i < 5; ++i) meter.add_transfer(kMiB, t0, t0 + milliseconds(1));
  EXPECT_NEAR(meter.estimate(3, t0).goodput_bytes_per_second, kMiB / 0.001, 1.0);
}

TEST(LinkMeterTest, LargeMessagesMeasureTheLinkTheyCameOver) {
  auto nodes = start_mesh(2);
  ASSERT_EQ(nodes.size(), 2u);
  for (uint32_t seq = 0; seq < 4; ++seq) {
    ASSERT_TRUE(nodes[0].transport->send(1, numbered_message(0, seq, 1u << 20)).ok());
  }
  ASSERT_TRUE(eventually([&] { return nodes[1].recorder->count_from(0) == 4; }));
  const auto into1 = nodes[1].transport->links();
  ASSERT_EQ(into1.size(), 1u);
  EXPECT_EQ(into1[0].peer, 0u);
  EXPECT_EQ(into1[0].samples, 4u);
  EXPECT_GT(into1[0].goodput_bytes_per_second, 1e6);  // loopback: far above 1 MB/s
  const auto into0 = nodes[0].transport->links();
  ASSERT_EQ(into0.size(), 1u);
  EXPECT_EQ(into0[0].peer, 1u);
  EXPECT_EQ(into0[0].samples, 0u) << "nothing large came from rank 1";
}

TEST(LinkMeterTest, IdleLinksAreProbedAndProbesNeverReachTheHandler) {
  auto nodes = start_mesh(2, milliseconds(20));
  ASSERT_EQ(nodes.size(), 2u);
  ASSERT_TRUE(eventually([&] {
    return nodes[0].transport->links()[0].samples >= 2 &&
           nodes[1].transport->links()[0].samples >= 2 &&
           nodes[0].transport->links()[0].rtt_seconds > 0.0;
  }));
  EXPECT_GT(nodes[0].transport->stats().probes_received, 0u);
  EXPECT_GT(nodes[1].transport->stats().probes_sent, 0u);
  EXPECT_EQ(nodes[0].transport->stats().messages_received, 0u);
  EXPECT_EQ(nodes[0].recorder->count_from(1), 0u);
  EXPECT_EQ(nodes[1].recorder->count_from(0), 0u);
  // Messages still travel between probes, in order.
  for (uint32_t seq = 0; seq < 50; ++seq) {
    ASSERT_TRUE(nodes[0].transport->send(1, numbered_message(0, seq)).ok());
  }
  ASSERT_TRUE(eventually([&] { return nodes[1].recorder->count_from(0) == 50; }));
  const auto messages = nodes[1].recorder->messages_from(0);
  for (uint32_t seq = 0; seq < 50; ++seq) EXPECT_EQ(sequence_of(messages[seq]), seq);
}

}  // namespace
}  // namespace gradgate::gateway::testing
