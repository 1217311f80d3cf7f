// The pod's network-status as Multus writes it and the downward API hands it over: the DPDK
// attachment a gateway takes from it, and the errors that say what is wrong and where.
#include "gateway/config/network_status.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace gradgate::gateway {
namespace {

using ::testing::HasSubstr;

// A downward API annotations file as the kubelet writes it: key="value" lines in key order, each
// value quoted as Go's %q (newlines and quotes escaped). The SR-IOV entry is a DPDK virtual
// function (PCI address, no kernel interface address in the pod); the macvlan one a kernel
// interface. Both have IPv4 addresses from their IPAM, the macvlan one after an IPv6 address.
const std::string kAnnotations =
    "k8s.v1.cni.cncf.io/network-status=\"[{\\n    \\\"name\\\": \\\"cbr0\\\",\\n    "
    "\\\"interface\\\": \\\"eth0\\\",\\n    \\\"ips\\\": [\\n        \\\"10.244.1.5\\\"\\n    ],\\n"
    "    \\\"default\\\": true,\\n    \\\"dns\\\": {}\\n},{\\n    \\\"name\\\": "
    "\\\"training/sriov-dpdk\\\",\\n    \\\"interface\\\": \\\"net1\\\",\\n    \\\"ips\\\": [\\n"
    "        \\\"192.168.50.7\\\"\\n    ],\\n    \\\"dns\\\": {},\\n    \\\"device-info\\\": {\\n"
    "        \\\"type\\\": \\\"pci\\\",\\n        \\\"version\\\": \\\"1.1.0\\\",\\n        "
    "\\\"pci\\\": {\\n            \\\"pci-address\\\": \\\"0000:3b:02.1\\\"\\n        }\\n    }\\n"
    "},{\\\"name\\\": \\\"training/macvlan\\\", \\\"interface\\\": \\\"net2\\\", \\\"ips\\\": "
    "[\\\"fd00::7\\\", \\\"192.168.60.7\\\"]}]\"\n"
    "k8s.v1.cni.cncf.io/networks=\"sriov-dpdk, macvlan\"\n"
    "kubernetes.io/config.seen=\"2026-11-26T10:00:00.000000000Z\"\n";

TEST(NetworkStatus, AVirtualFunctionGivesItsPciAddressAndIpv4Address) {
  const auto found = find_dpdk_attachment(kAnnotations, "sriov-dpdk");
  ASSERT_TRUE(found.ok()) << found.status().to_string();
  EXPECT_EQ(found->name, "training/sriov-dpdk");
  EXPECT_EQ(found->ipv4, "192.168.50.7");
  EXPECT_EQ(found->port, "0000:3b:02.1");
}

TEST(NetworkStatus, AKernelInterfaceGivesAPacketSocketPortAndItsFirstIpv4Address) {
  const auto found = find_dpdk_attachment(kAnnotations, "training/macvlan");
  ASSERT_TRUE(found.ok()) << found.status().to_string();
  EXPECT_EQ(found->ipv4, "192.168.60.7");
  EXPECT_EQ(found->port, "net_af_packet0,iface=net2");
}

TEST(NetworkStatus, TakesTheJsonListItselfAndGoEscapes) {
  const std::string list = R"([{"name": "ns/net", "interface": "n\u0065t1", "ips": ["10.1.2.3"]}])";
  const auto plain = find_dpdk_attachment(list, "ns/net");
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_EQ(plain->port, "net_af_packet0,iface=net1");
  // \x, \u and octal escapes of the Go quoting: "n\x65t\u0031" is "net1", \101 is "A".
  const std::string quoted =
      "k8s.v1.cni.cncf.io/network-status=\"[{\\\"name\\\": \\\"ns/\\101\\\", \\\"interface\\\": "
      "\\\"n\\x65t\\u0031\\\", \\\"ips\\\": [\\\"10.1.2.3\\\"]}]\"\n";
  const auto unquoted = find_dpdk_attachment(quoted, "A");
  ASSERT_TRUE(unquoted.ok()) << unquoted.status().to_string();
  EXPECT_EQ(unquoted->port, "net_af_packet0,iface=net1");
}

TEST(NetworkStatus, WhatIsNotThereYetIsNotFound) {
  const auto no_annotation =
      find_dpdk_attachment("kubernetes.io/config.seen=\"2026-11-26T10:00:00Z\"\n", "sriov-dpdk");
  EXPECT_EQ(no_annotation.status().code(), ErrorCode::kNotFound);
  EXPECT_THAT(no_annotation.status().message(), HasSubstr("no k8s.v1.cni.cncf.io/network-status"));
  const auto no_entry = find_dpdk_attachment(kAnnotations, "rdma");
  EXPECT_EQ(no_entry.status().code(), ErrorCode::kNotFound);
  EXPECT_THAT(no_entry.status().message(), HasSubstr("does not list the network \"rdma\""));
  // A namespace-qualified name matches only that namespace.
  EXPECT_EQ(find_dpdk_attachment(kAnnotations, "other/sriov-dpdk").status().code(),
            ErrorCode::kNotFound);
}

TEST(NetworkStatus, EntriesThatCannotCarryTheTransportAreRefused) {
  const auto no_ipv4 =
      find_dpdk_attachment(R"([{"name": "ns/v6", "interface": "net1", "ips": ["fd00::1"]}])", "v6");
  EXPECT_EQ(no_ipv4.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(no_ipv4.status().message(), HasSubstr("\"ns/v6\" has no IPv4 address"));
  const auto no_device =
      find_dpdk_attachment(R"([{"name": "ns/bare", "ips": ["10.0.0.1"]}])", "bare");
  EXPECT_THAT(no_device.status().message(),
              HasSubstr("\"ns/bare\" names neither a PCI device nor an interface"));
  const auto ambiguous = find_dpdk_attachment(
      R"([{"name": "a/net", "ips": ["10.0.0.1"]}, {"name": "b/net", "ips": ["10.0.0.2"]}])", "net");
  EXPECT_THAT(ambiguous.status().message(),
              HasSubstr("lists \"a/net\" and \"b/net\": give dpdk.network as namespace/name"));
}

TEST(NetworkStatus, ANetworkAttachedTwiceGivesItsFirstAttachment) {
  const auto twice = find_dpdk_attachment(
      R"([{"name": "a/net", "interface": "net1", "ips": ["10.0.0.1"]},
          {"name": "a/net", "interface": "net2", "ips": ["10.0.0.2"]}])",
      "net");
  ASSERT_TRUE(twice.ok()) << twice.status().to_string();
  EXPECT_EQ(twice->port, "net_af_packet0,iface=net1");
}

TEST(NetworkStatus, MalformedTextSaysWhatAndWhere) {
  const auto expect_refused = [](const std::string& text, const std::string& message) {
    const auto found = find_dpdk_attachment(text, "net");
    EXPECT_EQ(found.status().code(), ErrorCode::kInvalidArgument) << text;
    EXPECT_THAT(found.status().message(), HasSubstr(message)) << text;
  };
  expect_refused("[{\"name\": ", "network-status: not valid JSON");
  expect_refused("k8s.v1.cni.cncf.io/network-status=[]\n", "is not a quoted string");
  expect_refused("k8s.v1.cni.cncf.io/network-status=\"[\\q]\"\n", "unknown escape \\q");
  expect_refused("k8s.v1.cni.cncf.io/network-status=\"[\\u12\"\n", "bad \\u escape");
  expect_refused("k8s.v1.cni.cncf.io/network-status=\"{}\"\n", "network-status: not a list");
  expect_refused(R"([{"name": "ns/net"}, 7])", "entry 1 is not an object");
  expect_refused(R"([{"interface": "net1"}])", "entry 0 has no \"name\"");
  expect_refused(R"([{"name": "ns/net", "ips": "10.0.0.1"}])", "entry 0: \"ips\" is not a list");
  expect_refused(
      R"([{"name": "ns/net", "ips": ["10.0.0.1"], "device-info": {"pci": {"pci-address": 3}}}])",
      "entry 0: \"device-info.pci.pci-address\" is not a string");
}

}  // namespace
}  // namespace gradgate::gateway
