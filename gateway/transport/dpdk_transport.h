// The DPDK implementation of Transport: kernel bypass between gateways. Frames go straight
// between a DPDK port and the gateway's memory, polled by one thread the transport owns; the
// reliability layer (reliable/) makes the datagrams reliable, ordered, exactly-once message
// streams, one Session per peer.
//
// Each gateway is an IPv4 address and UDP port (job.nodes, by rank); messages travel as the
// reliable layer's packets in UDP over IPv4 over Ethernet, sized to the port's MTU (dpdk/
// udp_frame.h). Peers' MAC addresses are learned from their frames (broadcast until then).
// Semantics are TcpTransport's: send() queues or refuses at once (kUnavailable while the peer is
// down, kResourceExhausted over send_queue_bytes, kInvalidArgument for bad ranks or sizes);
// handlers run on the transport's thread; a peer that is lost (a message not acknowledged by
// message_deadline, silence for peer_timeout) is reported down, its queued messages dropped,
// and it comes back up by itself. See docs/transport.md.
//
// Threads: send(), peer_up(), peer_down_count(), stats() and links() from any thread; stop() not
// from a handler. The EAL is process-wide (dpdk/eal.h): every DpdkTransport of a process shares it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/net/endpoint.h"
#include "gateway/transport/dpdk/eal.h"
#include "gateway/transport/dpdk/impairment.h"
#include "gateway/transport/dpdk/port.h"
#include "gateway/transport/transport.h"

namespace gradgate::gateway {

struct DpdkTransportOptions {
  uint64_t job_id = 0;
  uint32_t rank = 0;
  /// Every gateway's IPv4 address and UDP port by rank (this gateway's own included).
  std::vector<net::Endpoint> peers;
  dpdk::EalOptions eal;
  dpdk::PortOptions port;
  uint64_t send_queue_bytes = 512ull << 20;   // per peer, message bytes not yet acknowledged
  uint64_t max_message_bytes = 256ull << 20;  // at most send_queue_bytes
  /// A message not acknowledged this long after send() fails and the peer goes down.
  std::chrono::milliseconds message_deadline{30000};
  /// Nothing heard from a peer for this long: it goes down (at least 4 hello intervals).
  std::chrono::milliseconds peer_timeout{5000};
  std::chrono::milliseconds hello_interval{100};
  /// 0: the polling thread spins (yielding) when there is nothing to do, for the lowest latency
  /// on a core of its own. Otherwise, once nothing was sent or received for 200 us, it sleeps
  /// this long between polls: less CPU on shared cores, up to this much more latency.
  std::chrono::microseconds idle_sleep{0};
  /// Fault injection (dpdk.inject_*): impairs outgoing datagrams. Off by default.
  dpdk::Impairments impairments;
};

class DpdkTransport final : public Transport {
 public:
  explicit DpdkTransport(DpdkTransportOptions options);
  ~DpdkTransport() override;  // stops
  DpdkTransport(const DpdkTransport&) = delete;
  DpdkTransport& operator=(const DpdkTransport&) = delete;

  /// Initialises the EAL (once per process), opens the port and starts the polling thread.
  /// kInvalidArgument for unusable options, kUnavailable when DPDK refuses, kAborted when called
  /// twice or after stop().
  Status start(Handlers handlers) override;
  /// Stops the polling thread and closes the port; reports no peer going down. Idempotent.
  void stop() override;
  Status send(uint32_t to_rank, Message message) override;
  bool peer_up(uint32_t rank) const override;
  uint64_t peer_down_count(uint32_t rank) const override;
  /// A peer listed at another address (a gateway restarted elsewhere: a recreated pod's new
  /// virtual function) is sent to there from the polling thread's next round; a link that was
  /// up at the old address goes down. Hosts that are not IPv4 addresses are logged and ignored.
  void update_peers(const std::vector<net::Endpoint>& peers) override;
  /// Every peer: each gets datagrams at its listed address.
  bool dials(uint32_t rank) const override;
  TransportStats stats() const override;
  std::vector<LinkEstimate> links() const override;

 private:
  class Poller;
  std::unique_ptr<Poller> poller_;
};

}  // namespace gradgate::gateway
