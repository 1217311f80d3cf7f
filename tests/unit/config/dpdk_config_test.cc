// job.transport and the dpdk section: read, checked, and refused with a clear error in a build
// without DPDK.
#include "config_test_support.h"
#include "gradgate/config.h"

namespace gradgate::gateway {
namespace {

using testing::error_lines;
using ::testing::HasSubstr;
using testing::parse;

constexpr const char* kDpdkYaml =
    "job:\n"
    "  nodes: [\"10.0.0.1:4791\", \"10.0.0.2:4791\"]\n"
    "  transport: dpdk\n"
    "dpdk:\n"
    "  port: \"net_af_packet0,iface=eth1\"\n"
    "  cores: \"2\"\n"
    "  memory_mb: 512\n"
    "  no_huge: true\n"
    "  mtu: 9000\n"
    "  mbufs: 16383\n"
    "  udp_port: 5000\n"
    "  eal_args: [\"--log-level=warning\"]\n";

TEST(DpdkConfig, TransportDefaultsToTcp) {
  const auto config = parse("job:\n  nodes: [\"127.0.0.1:29500\"]\n");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->transport, TransportKind::kTcp);
}

TEST(DpdkConfig, UnknownTransportIsRefused) {
  const auto config = parse("job:\n  nodes: [\"127.0.0.1:29500\"]\n  transport: rdma\n");
  EXPECT_THAT(config.status().message(), HasSubstr("\"rdma\" is not one of tcp, dpdk"));
}

#if GRADGATE_HAVE_DPDK

TEST(DpdkConfig, ReadsTheDpdkSection) {
  const auto config = parse(kDpdkYaml);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->transport, TransportKind::kDpdk);
  EXPECT_EQ(config->dpdk_port, "net_af_packet0,iface=eth1");
  EXPECT_EQ(config->dpdk_cores, "2");
  EXPECT_EQ(config->dpdk_memory_mb, 512u);
  EXPECT_TRUE(config->dpdk_no_huge);
  EXPECT_EQ(config->dpdk_mtu, 9000u);
  EXPECT_EQ(config->dpdk_mbufs, 16383u);
  EXPECT_EQ(config->dpdk_udp_port, 5000u);
  EXPECT_EQ(config->dpdk_eal_args, (std::vector<std::string>{"--log-level=warning"}));
}

TEST(DpdkConfig, NeedsAPortIpv4NodesAndSaneSizes) {
  const auto config = parse(
      "job:\n  nodes: [\"gateway-0:4791\", \"10.0.0.2:4791\"]\n  transport: dpdk\n"
      "dpdk:\n  mtu: 64\n  mbufs: 10\n");
  const std::string all = config.status().message();
  EXPECT_THAT(all, HasSubstr("job.nodes[0]: dpdk needs every gateway's IPv4 address"));
  EXPECT_THAT(all, HasSubstr("dpdk.port: is not set"));
  EXPECT_THAT(all, HasSubstr("dpdk.mtu: must be in 128..9000"));
  EXPECT_THAT(all, HasSubstr("dpdk.mbufs: must be at least"));
  EXPECT_EQ(error_lines(config).size(), 4u) << all;
}

TEST(DpdkConfig, NeedsAUdpPortPerNodeOrOneForAll) {
  const std::string nodes =
      "job:\n  nodes: [\"10.0.0.1:4791\", \"10.0.0.2:0\"]\n  transport: dpdk\n"
      "dpdk:\n  port: net_ring0\n";
  EXPECT_THAT(parse(nodes).status().message(), HasSubstr("job.nodes[1]: dpdk needs a UDP port"));
  EXPECT_TRUE(parse(nodes + "  udp_port: 4791\n").ok());
}

TEST(DpdkConfig, MembershipFromTheControllerNeedsAnIpv4ListenAddressAndAUdpPort) {
  const std::string sized =
      "job:\n  size: 2\n  transport: dpdk\ncontrol:\n  url: 127.0.0.1:9400\n"
      "dpdk:\n  port: net_ring0\n";
  const auto refused = parse(sized + "transport:\n  listen: gateway-0:0\n");
  EXPECT_THAT(refused.status().message(),
              HasSubstr("transport.listen: with dpdk and job.size, give this gateway's IPv4 "
                        "address on its DPDK port, got \"gateway-0\""));
  EXPECT_THAT(refused.status().message(), HasSubstr("dpdk.udp_port: dpdk with job.size needs"));
  EXPECT_EQ(error_lines(refused).size(), 2u) << refused.status().message();
  const auto taken = parse(sized + "  udp_port: 4791\ntransport:\n  listen: 10.0.0.1:0\n");
  ASSERT_TRUE(taken.ok()) << taken.status().message();
  EXPECT_EQ(taken->size, 2u);
}

TEST(DpdkConfig, TheNetworkStatusGivesTheAddressAndPortOfAGatewayOfAJobSize) {
  const std::string sized =
      "job:\n  size: 2\n  transport: dpdk\ncontrol:\n  url: 127.0.0.1:9400\n"
      "dpdk:\n  udp_port: 4791\n";
  const auto taken = parse(sized +
                           "  network_status_file: /etc/podinfo/annotations\n"
                           "  network: sriov-dpdk\n  network_wait_ms: 30000\n");
  ASSERT_TRUE(taken.ok()) << taken.status().message();
  EXPECT_EQ(taken->dpdk_network_status_file, "/etc/podinfo/annotations");
  EXPECT_EQ(taken->dpdk_network, "sriov-dpdk");
  EXPECT_EQ(taken->dpdk_network_wait, std::chrono::milliseconds(30000));
  EXPECT_TRUE(taken->dpdk_port.empty());

  const auto alone = parse(sized + "  network_status_file: /etc/podinfo/annotations\n");
  EXPECT_THAT(
      alone.status().message(),
      HasSubstr("dpdk.network: dpdk.network_status_file and dpdk.network are set together"));
  const auto static_job = parse(
      "job:\n  nodes: [\"10.0.0.1:4791\", \"10.0.0.2:4791\"]\n  transport: dpdk\n"
      "dpdk:\n  network_status_file: /etc/podinfo/annotations\n  network: sriov-dpdk\n");
  EXPECT_THAT(static_job.status().message(), HasSubstr("dpdk.network_status_file: needs job.size"));
  EXPECT_EQ(error_lines(static_job).size(), 1u) << static_job.status().message();
}

TEST(DpdkConfig, ReadsFaultInjection) {
  const auto config = parse(std::string(kDpdkYaml) +
                            "  inject_drop: 0.05\n  inject_duplicate: 1e-2\n  inject_reorder: 0\n"
                            "  inject_seed: 7\n");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_DOUBLE_EQ(config->dpdk_inject_drop, 0.05);
  EXPECT_DOUBLE_EQ(config->dpdk_inject_duplicate, 0.01);
  EXPECT_DOUBLE_EQ(config->dpdk_inject_reorder, 0.0);
  EXPECT_EQ(config->dpdk_inject_seed, 7u);
}

TEST(DpdkConfig, RefusesFaultInjectionOutsideFractions) {
  const std::string all =
      parse(std::string(kDpdkYaml) + "  inject_drop: 1.5\n  inject_duplicate: lots\n")
          .status()
          .message();
  EXPECT_THAT(all, HasSubstr("dpdk.inject_drop: \"1.5\" is not in [0, 1)"));
  EXPECT_THAT(all, HasSubstr("dpdk.inject_duplicate: must be a number, got \"lots\""));
  EXPECT_THAT(parse(std::string(kDpdkYaml) + "  inject_drop: 0.6\n  inject_reorder: 0.5\n")
                  .status()
                  .message(),
              HasSubstr("inject_drop + inject_duplicate + inject_reorder must be below 1"));
}

#else

TEST(DpdkConfig, ABuildWithoutDpdkSaysSo) {
  const auto config = parse(kDpdkYaml);
  EXPECT_THAT(config.status().message(),
              HasSubstr("job.transport: dpdk: this gradgate was built without DPDK"));
}

#endif

}  // namespace
}  // namespace gradgate::gateway
