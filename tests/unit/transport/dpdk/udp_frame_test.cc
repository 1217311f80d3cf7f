// The DPDK transport's frame headers and the impairment hook, byte by byte.
#include <gtest/gtest.h>

#include <vector>

#include "gateway/transport/dpdk/impairment.h"
#include "gateway/transport/dpdk/udp_frame.h"

namespace gradgate::gateway::dpdk {
namespace {

std::vector<std::byte> make_frame(std::size_t payload_bytes) {
  std::vector<std::byte> frame(kFrameHeaderBytes + payload_bytes);
  for (std::size_t i = 0; i < payload_bytes; ++i) frame[kFrameHeaderBytes + i] = std::byte(i);
  write_frame_headers(std::span<std::byte, kFrameHeaderBytes>(frame.data(), kFrameHeaderBytes),
                      MacAddress{{2, 0, 0, 0, 0, 1}}, kBroadcastMac, {0x0a000001, 4791},
                      {0x0a000002, 4792}, payload_bytes);
  return frame;
}

TEST(UdpFrameTest, RoundTripsAddressesAndPayload) {
  std::vector<std::byte> frame = make_frame(100);
  frame.resize(frame.size() + 6);  // Ethernet padding is ignored
  const auto parsed = parse_frame(frame);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->src_mac, (MacAddress{{2, 0, 0, 0, 0, 1}}));
  EXPECT_EQ(parsed->src, (UdpAddress{0x0a000001, 4791}));
  EXPECT_EQ(parsed->dst, (UdpAddress{0x0a000002, 4792}));
  ASSERT_EQ(parsed->payload.size(), 100u);
  EXPECT_EQ(parsed->payload[99], std::byte{99});
}

TEST(UdpFrameTest, RefusesBrokenHeaders) {
  const std::vector<std::byte> good = make_frame(10);
  auto broken = good;
  broken[14 + 10] ^= std::byte{1};  // IPv4 header checksum
  EXPECT_FALSE(parse_frame(broken));
  broken = good;
  broken[12] = std::byte{0x86};  // not IPv4
  EXPECT_FALSE(parse_frame(broken));
  EXPECT_FALSE(parse_frame(std::span(good).first(good.size() - 1)));  // truncated
  EXPECT_FALSE(parse_frame(std::span(good).first(20)));
}

TEST(UdpFrameTest, ParsesIpv4LiteralsOnly) {
  EXPECT_EQ(*parse_ipv4("10.0.0.2"), 0x0a000002u);
  EXPECT_FALSE(parse_ipv4("gateway-0").ok());
  EXPECT_EQ(udp_payload_limit(1500), 1472u);
}

TEST(ImpairmentTest, FractionsAreRoughlyThoseAskedFor) {
  Impairer impairer({0.05, 0.01, 0.02, 42});
  int counts[4] = {0, 0, 0, 0};
  for (int i = 0; i < 100000; ++i) ++counts[static_cast<int>(impairer.next())];
  EXPECT_NEAR(counts[1], 5000, 500);
  EXPECT_NEAR(counts[2], 1000, 200);
  EXPECT_NEAR(counts[3], 2000, 300);
  EXPECT_FALSE(check(Impairments{0.5, 0.5, 0.0, 1}).ok());
  Impairer off({});
  EXPECT_EQ(off.next(), Impairer::Fate::kSend);
}

}  // namespace
}  // namespace gradgate::gateway::dpdk
