#include "common/http/connection_slots.h"

namespace gradgate::http {

std::optional<ConnectionSlots::Ticket> ConnectionSlots::take() {
  std::shared_ptr<Evictable> evicted;
  Ticket ticket = 0;
  {
    std::lock_guard lock(mutex_);
    if (holders_.size() >= limit_) {
      if (waiting_.empty()) return std::nullopt;
      const auto oldest = waiting_.begin();
      const auto holder = holders_.find(oldest->second);
      evicted = holder->second.connection.lock();
      holders_.erase(holder);
      waiting_.erase(oldest);
    }
    ticket = next_ticket_++;
    holders_.emplace(ticket, Holder{});
  }
  if (evicted) evicted->evict();  // outside the lock: it may give back nothing, but it may log
  return ticket;
}

void ConnectionSlots::waiting(Ticket ticket, std::weak_ptr<Evictable> connection) {
  std::lock_guard lock(mutex_);
  const auto holder = holders_.find(ticket);
  if (holder == holders_.end() || holder->second.waiting_since) return;
  holder->second.connection = std::move(connection);
  holder->second.waiting_since = next_wait_++;
  waiting_.emplace(*holder->second.waiting_since, ticket);
}

void ConnectionSlots::busy(Ticket ticket) {
  std::lock_guard lock(mutex_);
  const auto holder = holders_.find(ticket);
  if (holder == holders_.end() || !holder->second.waiting_since) return;
  waiting_.erase(*holder->second.waiting_since);
  holder->second.waiting_since.reset();
}

void ConnectionSlots::give_back(Ticket ticket) {
  std::lock_guard lock(mutex_);
  const auto holder = holders_.find(ticket);
  if (holder == holders_.end()) return;  // evicted: its slot went to another connection
  if (holder->second.waiting_since) waiting_.erase(*holder->second.waiting_since);
  holders_.erase(holder);
}

bool ConnectionSlots::take_refusal() {
  std::lock_guard lock(mutex_);
  if (refusals_ >= limit_) return false;
  ++refusals_;
  return true;
}

void ConnectionSlots::give_back_refusal() {
  std::lock_guard lock(mutex_);
  --refusals_;
}

}  // namespace gradgate::http
