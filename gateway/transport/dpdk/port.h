// One DPDK Ethernet port with one RX and one TX queue and its own mbuf pool: what the DPDK
// transport sends and receives frames through.
//
// The port is named by a device string: a virtual device ("net_af_packet0,iface=veth0",
// "net_ring0") is hot-plugged when it does not exist yet, a PCI address ("0000:3b:00.0") must be
// one the EAL probed. Tests can hand over a port they made themselves (rte_eth_from_rings) by id.
// The mbuf pool holds `mbufs` buffers, each with room for one frame of the MTU.
//
// Not thread-safe: after open(), only the polling thread uses a port. The destructor stops and
// closes it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "gateway/transport/dpdk/udp_frame.h"
#include "gradgate/base/status.h"

struct rte_mbuf;
struct rte_mempool;

namespace gradgate::gateway::dpdk {

struct PortOptions {
  std::string device;    // vdev string or PCI address; "" = use `port_id`
  uint16_t port_id = 0;  // an existing port, when `device` is empty
  uint32_t mtu = 1500;
  uint32_t mbufs = 8191;      // in the pool; a power of two minus one fits the pool best
  uint16_t ring_size = 1024;  // RX and TX descriptors
};

class Port {
 public:
  /// Finds (or hot-plugs) the device, makes the pool, configures and starts the port.
  /// kInvalidArgument for a device that cannot be found, kUnavailable when DPDK refuses.
  static Result<std::unique_ptr<Port>> open(const PortOptions& options);
  ~Port();
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  uint16_t id() const { return id_; }
  const MacAddress& mac() const { return mac_; }
  uint32_t mtu() const { return mtu_; }

  /// A buffer for one frame, or null when the pool is empty.
  rte_mbuf* allocate();
  /// Up to `frames.size()` received frames; the caller frees them (rte_pktmbuf_free).
  uint16_t receive(std::span<rte_mbuf*> frames);
  /// Queues the frames for transmission and returns how many the port took (it frees those);
  /// the rest stay the caller's.
  uint16_t transmit(std::span<rte_mbuf*> frames);

 private:
  Port(uint16_t id, rte_mempool* pool, uint32_t mtu);

  uint16_t id_;
  rte_mempool* pool_;
  uint32_t mtu_;
  MacAddress mac_;
};

}  // namespace gradgate::gateway::dpdk
