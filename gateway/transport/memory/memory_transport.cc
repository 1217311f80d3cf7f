#include "gateway/transport/memory/memory_transport.h"

#include <utility>

namespace gradgate::gateway {

MemoryFabric::MemoryFabric(uint32_t ranks, uint64_t queue_cap_bytes)
    : ranks_(ranks), queue_cap_bytes_(queue_cap_bytes), started_(ranks, nullptr) {}

Status MemoryFabric::attach(MemoryTransport& transport) {
  MutexLock lock(mutex_);
  const uint32_t rank = transport.rank_;
  if (started_[rank] != nullptr) {
    return Status(ErrorCode::kInvalidArgument,
                  "rank " + std::to_string(rank) + " is started on this fabric already");
  }
  started_[rank] = &transport;
  for (uint32_t peer = 0; peer < ranks_; ++peer) {
    if (peer == rank || started_[peer] == nullptr) continue;
    started_[peer]->push({rank, nullptr, true}, UINT64_MAX);
    transport.push({peer, nullptr, true}, UINT64_MAX);
  }
  return {};
}

void MemoryFabric::detach(MemoryTransport& transport) {
  MutexLock lock(mutex_);
  const uint32_t rank = transport.rank_;
  if (started_[rank] != &transport) return;
  started_[rank] = nullptr;
  for (MemoryTransport* peer : started_) {
    if (peer != nullptr) peer->push({rank, nullptr, false}, UINT64_MAX);
  }
}

Status MemoryFabric::deliver(uint32_t from, uint32_t to, Message message) {
  MutexLock lock(mutex_);
  if (started_[from] == nullptr || started_[to] == nullptr) {
    return Status(ErrorCode::kUnavailable, "gateway " + std::to_string(to) + " is not connected");
  }
  if (!started_[to]->push({from, std::move(message), false}, queue_cap_bytes_)) {
    return Status(ErrorCode::kResourceExhausted,
                  "the queue to gateway " + std::to_string(to) + " is full");
  }
  return {};
}

void MemoryFabric::reset(uint32_t rank, uint32_t from) {
  MutexLock lock(mutex_);
  if (started_[rank] == nullptr || started_[from] == nullptr) return;
  for (const bool up : {false, true}) {
    started_[rank]->push({from, nullptr, up}, UINT64_MAX);
    started_[from]->push({rank, nullptr, up}, UINT64_MAX);
  }
}

MemoryTransport::MemoryTransport(MemoryFabric& fabric, uint32_t rank)
    : fabric_(fabric), rank_(rank), up_(fabric.ranks(), false), down_counts_(fabric.ranks(), 0) {}

MemoryTransport::~MemoryTransport() { stop(); }

Status MemoryTransport::start(Handlers handlers) {
  if (rank_ >= fabric_.ranks()) {
    return Status(ErrorCode::kInvalidArgument, "rank " + std::to_string(rank_) +
                                                   " is not on a fabric of " +
                                                   std::to_string(fabric_.ranks()) + " ranks");
  }
  {
    MutexLock lock(mutex_);
    if (started_) return Status(ErrorCode::kInvalidArgument, "the transport is started already");
    started_ = true;
  }
  handlers_ = std::move(handlers);
  thread_ = std::thread([this] { serve(); });
  return fabric_.attach(*this);
}

void MemoryTransport::stop() {
  {
    MutexLock lock(mutex_);
    if (!started_ || stopping_) return;
    stopping_ = true;
  }
  fabric_.detach(*this);  // no message arrives from now on
  changed_.notify_all();
  thread_.join();
}

Status MemoryTransport::send(uint32_t to_rank, Message message) {
  if (to_rank >= fabric_.ranks() || to_rank == rank_) {
    return Status(ErrorCode::kInvalidArgument, "no peer of rank " + std::to_string(to_rank));
  }
  const uint64_t bytes = message->size();
  GRADGATE_RETURN_IF_ERROR(fabric_.deliver(rank_, to_rank, std::move(message)));
  MutexLock lock(mutex_);
  ++stats_.messages_sent;
  stats_.bytes_sent += bytes;
  return {};
}

bool MemoryTransport::push(Event event, uint64_t cap) {
  {
    MutexLock lock(mutex_);
    if (stopping_) return true;  // dropped, as by a connection that closes
    if (event.message) {
      if (queued_bytes_ + event.message->size() > cap) return false;
      queued_bytes_ += event.message->size();
    }
    events_.push_back(std::move(event));
  }
  changed_.notify_all();
  return true;
}

void MemoryTransport::serve() {
  MutexLock lock(mutex_);
  while (true) {
    while (events_.empty() && !stopping_) changed_.wait(lock);
    if (stopping_) return;
    Event event = std::move(events_.front());
    events_.pop_front();
    if (event.message) {
      queued_bytes_ -= event.message->size();
      ++stats_.messages_received;
      stats_.bytes_received += event.message->size();
    } else {
      if (event.up) {
        ++stats_.connects;
        ++stats_.peers_up;
      } else {
        ++stats_.disconnects;
        --stats_.peers_up;
        if (up_[event.peer]) ++down_counts_[event.peer];
      }
      up_[event.peer] = event.up;
    }
    lock.unlock();
    bool accepted = true;
    if (event.message) {
      MessageBytes bytes(*event.message);  // the handler takes it; a fan-out shares the original
      accepted = handlers_.on_message(event.peer, std::move(bytes));
    } else {
      handlers_.on_peer(event.peer, event.up);
    }
    if (!accepted) fabric_.reset(rank_, event.peer);
    lock.lock();
    if (!accepted) ++stats_.rejected;
  }
}

bool MemoryTransport::peer_up(uint32_t rank) const {
  MutexLock lock(mutex_);
  return rank < up_.size() && up_[rank];
}

uint64_t MemoryTransport::peer_down_count(uint32_t rank) const {
  MutexLock lock(mutex_);
  return rank < down_counts_.size() ? down_counts_[rank] : 0;
}

TransportStats MemoryTransport::stats() const {
  MutexLock lock(mutex_);
  TransportStats stats = stats_;
  stats.queued_bytes = queued_bytes_;
  return stats;
}

std::vector<LinkEstimate> MemoryTransport::links() const {
  std::vector<LinkEstimate> links;
  for (uint32_t peer = 0; peer < fabric_.ranks(); ++peer) {
    if (peer != rank_) links.push_back({peer});
  }
  return links;
}

}  // namespace gradgate::gateway
