#include "gateway/transport/dpdk/port.h"

#include <algorithm>
#include <atomic>
#include <cerrno>

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

namespace gradgate::gateway::dpdk {
namespace {

constexpr unsigned kPoolCache = 256;

Status dpdk_error(const std::string& what, int error) {
  return Status(ErrorCode::kUnavailable,
                "dpdk: " + what + ": " + rte_strerror(error < 0 ? -error : error));
}

Result<uint16_t> find_device(const std::string& device) {
  const std::string name = device.substr(0, device.find(','));
  uint16_t id = 0;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &id) == 0) return id;
  const int probed = rte_dev_probe(device.c_str());
  if (probed < 0 && probed != -EEXIST) {
    return Status(ErrorCode::kInvalidArgument,
                  "dpdk: no port '" + device + "': " + rte_strerror(-probed));
  }
  if (rte_eth_dev_get_port_by_name(name.c_str(), &id) != 0) {
    return Status(ErrorCode::kInvalidArgument, "dpdk: device '" + device + "' is not a port");
  }
  return id;
}

}  // namespace

Result<std::unique_ptr<Port>> Port::open(const PortOptions& options) {
  uint16_t id = options.port_id;
  if (!options.device.empty()) {
    Result<uint16_t> found = find_device(options.device);
    if (!found.ok()) return found.status();
    id = *found;
  }
  if (!rte_eth_dev_is_valid_port(id)) {
    return Status(ErrorCode::kInvalidArgument, "dpdk: no port " + std::to_string(id));
  }
  static std::atomic<uint32_t> pools{0};
  const std::string pool_name = "gg_pool_" + std::to_string(pools++);
  // Drivers such as af_packet want room for a whole 2 KiB ring frame whatever the MTU.
  const auto room = static_cast<uint16_t>(std::max<uint32_t>(
      RTE_MBUF_DEFAULT_BUF_SIZE, RTE_PKTMBUF_HEADROOM + kEthernetHeaderBytes + options.mtu));
  rte_mempool* pool = rte_pktmbuf_pool_create(pool_name.c_str(), options.mbufs, kPoolCache, 0, room,
                                              rte_eth_dev_socket_id(id));
  if (pool == nullptr)
    return dpdk_error("mbuf pool of " + std::to_string(options.mbufs), rte_errno);
  std::unique_ptr<Port> port(new Port(id, pool, options.mtu));

  rte_eth_conf conf{};
  conf.rxmode.mtu = options.mtu;
  if (int rc = rte_eth_dev_configure(id, 1, 1, &conf); rc < 0) return dpdk_error("configure", rc);
  uint16_t rx_ring = options.ring_size, tx_ring = options.ring_size;
  if (int rc = rte_eth_dev_adjust_nb_rx_tx_desc(id, &rx_ring, &tx_ring); rc < 0) {
    return dpdk_error("ring sizes", rc);
  }
  const int socket = rte_eth_dev_socket_id(id);
  if (int rc = rte_eth_rx_queue_setup(id, 0, rx_ring, socket, nullptr, pool); rc < 0) {
    return dpdk_error("RX queue", rc);
  }
  if (int rc = rte_eth_tx_queue_setup(id, 0, tx_ring, socket, nullptr); rc < 0) {
    return dpdk_error("TX queue", rc);
  }
  rte_eth_promiscuous_enable(id);  // not every device has it; our own frames are filtered anyway
  if (int rc = rte_eth_dev_start(id); rc < 0) return dpdk_error("start", rc);
  rte_ether_addr mac{};
  rte_eth_macaddr_get(id, &mac);
  std::copy(std::begin(mac.addr_bytes), std::end(mac.addr_bytes), port->mac_.bytes.begin());
  return port;
}

Port::Port(uint16_t id, rte_mempool* pool, uint32_t mtu) : id_(id), pool_(pool), mtu_(mtu) {}

Port::~Port() {
  rte_eth_dev_stop(id_);
  rte_eth_dev_close(id_);
  rte_mempool_free(pool_);
}

rte_mbuf* Port::allocate() { return rte_pktmbuf_alloc(pool_); }

uint16_t Port::receive(std::span<rte_mbuf*> frames) {
  return rte_eth_rx_burst(id_, 0, frames.data(), static_cast<uint16_t>(frames.size()));
}

uint16_t Port::transmit(std::span<rte_mbuf*> frames) {
  return rte_eth_tx_burst(id_, 0, frames.data(), static_cast<uint16_t>(frames.size()));
}

}  // namespace gradgate::gateway::dpdk
