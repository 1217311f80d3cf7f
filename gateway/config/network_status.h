// A Kubernetes pod's secondary networks as Multus reports them in the pod's
// `k8s.v1.cni.cncf.io/network-status` annotation: where a DaemonSet's gateway learns its DPDK
// port (an SR-IOV virtual function's PCI address, or a kernel interface) and its IPv4 address on
// it, which differ from node to node and are only known once the pod's networks are attached.
//
// The annotation reaches the gateway through a downward API volume: a file of `key="value"` lines,
// each value quoted as Go's %q does. Multus writes the annotation while the pod's sandbox is set
// up, and the kubelet refreshes such a file only later, so a gateway may have to wait for it
// (dpdk.network_wait_ms).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gradgate/base/status.h"

namespace gradgate::gateway {

/// Where a gateway's DPDK transport runs, as one network-status entry gives it.
struct DpdkAttachment {
  std::string name;  // the entry's name: "namespace/network"
  std::string ipv4;  // the entry's first IPv4 address: this gateway's address for its peers
  std::string port;  // dpdk.port: the entry's PCI address (a virtual function bound to a DPDK
                     // driver), else a packet-socket virtual device on its kernel interface
};

/// The attachment named `network` ("namespace/name" exactly, or "name" in any namespace; the
/// first where the pod has it twice) in `text`: a downward API annotations file, or the
/// network-status JSON list itself.
/// kNotFound while the annotation or the entry is missing (it may come later); kInvalidArgument,
/// saying what and where, for malformed quoting or JSON, a name in several namespaces, or an
/// entry without an IPv4 address or without a device.
Result<DpdkAttachment> find_dpdk_attachment(std::string_view text, std::string_view network);

}  // namespace gradgate::gateway
