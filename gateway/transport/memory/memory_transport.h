// Transports between the gateways of one process: a MemoryFabric joins a MemoryTransport per
// rank, and a message sent is handed to its receiver's handler on the receiver's own thread, in
// the order sent, without a socket. For tests of the collectives and the core that are not about
// a fabric: they run as fast as the code under test, and a peer's death is a transport stopped.
// It keeps the Transport contract: send() never blocks (a receiver's queue over the cap is
// kResourceExhausted), a message the handler refuses resets the link (both sides see the peer go
// down, then come back up), and no handler runs after stop() returns.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "gateway/transport/transport.h"
#include "gradgate/base/mutex.h"

namespace gradgate::gateway {

class MemoryTransport;

/// The ranks of one job in this process; outlives every MemoryTransport made on it.
class MemoryFabric {
 public:
  /// `queue_cap_bytes`: the most bytes of messages waiting for one receiver.
  explicit MemoryFabric(uint32_t ranks, uint64_t queue_cap_bytes = uint64_t{1} << 30);
  uint32_t ranks() const { return ranks_; }

 private:
  friend class MemoryTransport;
  Status attach(MemoryTransport& transport) GRADGATE_EXCLUDES(mutex_);
  void detach(MemoryTransport& transport) GRADGATE_EXCLUDES(mutex_);
  /// kUnavailable when `to` is not started.
  Status deliver(uint32_t from, uint32_t to, Message message) GRADGATE_EXCLUDES(mutex_);
  /// `rank` refused a message of `from`: the link resets.
  void reset(uint32_t rank, uint32_t from) GRADGATE_EXCLUDES(mutex_);

  const uint32_t ranks_;
  const uint64_t queue_cap_bytes_;
  mutable Mutex mutex_;
  std::vector<MemoryTransport*> started_ GRADGATE_GUARDED_BY(mutex_);  // by rank; null: not
};

class MemoryTransport final : public Transport {
 public:
  /// Rank `rank` of `fabric`, which must outlive it.
  MemoryTransport(MemoryFabric& fabric, uint32_t rank);
  ~MemoryTransport() override;

  Status start(Handlers handlers) override;
  void stop() override;
  Status send(uint32_t to_rank, Message message) override;
  /// As this transport's handlers are told: set just before on_peer runs.
  bool peer_up(uint32_t rank) const override;
  uint64_t peer_down_count(uint32_t rank) const override;
  TransportStats stats() const override;
  std::vector<LinkEstimate> links() const override;

 private:
  friend class MemoryFabric;
  // What the receiving thread hands to the handlers: a message, or a peer going up or down.
  struct Event {
    uint32_t peer = 0;
    Message message;  // null: a change of the peer's state
    bool up = false;
  };

  /// Queues `event`; false (nothing queued) when a message would pass `cap` bytes waiting.
  bool push(Event event, uint64_t cap) GRADGATE_EXCLUDES(mutex_);
  void serve() GRADGATE_EXCLUDES(mutex_);

  MemoryFabric& fabric_;
  const uint32_t rank_;
  Handlers handlers_;
  mutable Mutex mutex_;
  CondVar changed_;
  std::deque<Event> events_ GRADGATE_GUARDED_BY(mutex_);
  uint64_t queued_bytes_ GRADGATE_GUARDED_BY(mutex_) = 0;
  TransportStats stats_ GRADGATE_GUARDED_BY(mutex_);
  std::vector<bool> up_ GRADGATE_GUARDED_BY(mutex_);               // by rank
  std::vector<uint64_t> down_counts_ GRADGATE_GUARDED_BY(mutex_);  // by rank
  bool started_ GRADGATE_GUARDED_BY(mutex_) = false;
  bool stopping_ GRADGATE_GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

}  // namespace gradgate::gateway
