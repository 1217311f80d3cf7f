// How gateways reach each other: an interface with one implementation per fabric (TCP here, DPDK
// later), so that the collectives never see sockets.
//
// A transport moves opaque messages (the collective layer's envelope followed by a wire frame)
// between the gateways of one job, addressed by rank. It keeps one persistent connection per
// peer, reconnects after failures, and reports peers going up and down. It never blocks the
// caller: send() queues, and a full queue is an error the caller sees at once (backpressure).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "common/net/endpoint.h"
#include "gradgate/base/status.h"

namespace gradgate::gateway {

/// Allocates like std::allocator but leaves default-constructed elements uninitialised.
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}  // NOLINT
  template <typename U, typename... Args>
  void construct(U* place, Args&&... args) {
    ::new (static_cast<void*>(place)) U(std::forward<Args>(args)...);
  }
  template <typename U>
  void construct(U* place) noexcept {
    ::new (static_cast<void*>(place)) U;
  }
};

/// The bytes of one message. Not zero-filled when sized: every buffer is written whole (received
/// or encoded) before it is read, and clearing a frame of tens of megabytes would cost a pass over
/// memory per message.
using MessageBytes = std::vector<std::byte, UninitializedAllocator<std::byte>>;

/// One message as it travels: shared so that a fan-out to several peers needs no copies.
using Message = std::shared_ptr<const MessageBytes>;

/// Why a transport reported a peer down (its session with the peer is over, and with it what
/// was in flight): the peer restarted (it lost its state), it said it is stopping, nothing of it
/// moved for peer_timeout, its address refused the connection (nothing listens there: the
/// gateway is gone), or it broke the protocol (a malformed frame, a message the handler rejected).
enum class PeerDownReason : uint8_t { kRestarted, kStopped, kSilent, kRefused, kProtocol };
inline constexpr std::size_t kPeerDownReasons = 5;
/// Stable lower-case name of a reason, for logs and the `reason` label of metrics.
constexpr const char* peer_down_reason_name(PeerDownReason reason) {
  constexpr const char* kNames[kPeerDownReasons] = {"restarted", "stopped", "silent", "refused",
                                                    "protocol"};
  return kNames[static_cast<std::size_t>(reason)];
}

/// Counters of one transport, for metrics. Monotonic except the gauges marked so.
struct TransportStats {
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
  uint64_t bytes_sent = 0;      // message bytes, framing included
  uint64_t bytes_received = 0;  // message bytes, framing included
  uint64_t connects = 0;        // connections established (first ones and reconnections)
  uint64_t disconnects = 0;     // connections lost or reset
  uint64_t rejected = 0;        // messages refused by the handler or the framing: connection reset
  uint64_t foreign = 0;         // handshakes from another job or an unknown rank: refused
  uint64_t probes_sent = 0;     // link probes (not counted in messages_sent; bytes are)
  uint64_t probes_received = 0;
  uint64_t retransmits = 0;      // datagram fabrics: packets sent again (timeouts and fast)
  uint64_t reconnects = 0;       // connections that carried a live session on after one broke
  uint64_t resent_messages = 0;  // messages written again after a reconnect (in messages_sent)
  uint64_t resent_bytes = 0;     // their bytes, framing included (in bytes_sent)
  /// Peers reported down, by PeerDownReason.
  std::array<uint64_t, kPeerDownReasons> peers_down{};
  uint64_t queued_bytes = 0;  // gauge: bytes held for peers until they acknowledge them
  uint32_t peers_up = 0;      // gauge
  /// Polling fabrics: CPU time of the thread that polls the port (0 where nothing polls).
  double poll_cpu_seconds = 0.0;
};

/// The link from one peer to this gateway, as measured on its own traffic (and probes).
struct LinkEstimate {
  uint32_t peer = 0;
  double goodput_bytes_per_second = 0.0;  // 0: not measured yet
  double rtt_seconds = 0.0;               // 0: not known
  double age_seconds = 0.0;               // since the last goodput sample
  uint64_t samples = 0;                   // goodput samples taken since start
};

class Transport {
 public:
  struct Handlers {
    /// A whole message from `from_rank`. Return false if it is malformed: the transport counts it
    /// in `rejected` and resets that connection. Called on the transport's own thread; must not
    /// block.
    std::function<bool(uint32_t from_rank, MessageBytes&& message)> on_message;
    /// A peer's connection came up (true) or went down (false). Called on the transport's thread
    /// after peer_down_count() (and peer_up(), except for a peer that restarted, which is reported
    /// down and up again while peer_up() stays true) tell the change, so that a wait woken by it
    /// sees it. stop() reports nothing: waits on a stopping transport end by their own deadline or
    /// by their owner's shutdown.
    std::function<void(uint32_t rank, bool up)> on_peer;
  };

  virtual ~Transport() = default;

  /// Starts listening and connecting to the peers. Handlers must outlive the transport.
  virtual Status start(Handlers handlers) = 0;
  /// Stops every connection and thread; no handler runs after it returns. Idempotent.
  virtual void stop() = 0;

  /// Queues `message` for `to_rank`. kUnavailable if that peer is not connected now,
  /// kResourceExhausted if its send queue is over the configured cap, kInvalidArgument for an
  /// unknown rank, this gateway's own rank, or a message over the size limit.
  virtual Status send(uint32_t to_rank, Message message) = 0;

  /// The peers' liveness, which the transport alone keeps: whether `rank` is connected now, and
  /// how many times it went down since start (each on_peer(rank, false)). Safe from any thread.
  virtual bool peer_up(uint32_t rank) const = 0;
  virtual uint64_t peer_down_count(uint32_t rank) const = 0;
  /// The peers' addresses as the job's membership lists them now, by rank (an empty host where
  /// it knows none): a transport that dials its peers dials a moved one at its new address (a
  /// gateway restarted elsewhere). One whose addresses are fixed ignores them.
  virtual void update_peers(const std::vector<net::Endpoint>& peers) { (void)peers; }
  /// Whether this gateway reaches `rank` at the address the membership lists (TCP: the lower
  /// ranks, which it dials; DPDK: every peer, which it sends datagrams to): a peer that is down
  /// and moved can only come back through update_peers. False where addresses are fixed.
  virtual bool dials(uint32_t rank) const {
    (void)rank;
    return false;
  }
  virtual TransportStats stats() const = 0;
  /// Every peer's link to this gateway (own rank excluded), by rank.
  virtual std::vector<LinkEstimate> links() const = 0;
};

}  // namespace gradgate::gateway
