#include "common/http/connection_slots.h"

#include <vector>

namespace gradgate::http {

std::vector<ConnectionSlots::Candidate> ConnectionSlots::candidates_locked() const {
  std::vector<Candidate> idle, closing;
  for (const auto& [since, ticket] : waiting_) {
    const auto holder = holders_.find(ticket);
    if (holder == holders_.end() || !holder->second.wait) continue;  // cannot be: kept in step
    auto& list = *holder->second.wait == Wait::kRequest ? idle : closing;
    list.push_back({ticket, since, holder->second.connection});
  }
  idle.insert(idle.end(), closing.begin(), closing.end());
  return idle;
}

std::optional<ConnectionSlots::Ticket> ConnectionSlots::take_from_locked(
    const Candidate& candidate) {
  const auto waiting = waiting_.find(candidate.since);
  if (waiting == waiting_.end() || waiting->second != candidate.ticket) return std::nullopt;
  waiting_.erase(waiting);
  holders_.erase(candidate.ticket);
  return add_holder_locked();
}

ConnectionSlots::Ticket ConnectionSlots::add_holder_locked() {
  const Ticket ticket = next_ticket_++;
  holders_.emplace(ticket, Holder{});
  return ticket;
}

std::optional<ConnectionSlots::Ticket> ConnectionSlots::take() {
  std::vector<Candidate> candidates;
  {
    std::lock_guard lock(mutex_);
    if (holders_.size() < limit_) return add_holder_locked();
    candidates = candidates_locked();
  }
  // The connections are asked without the lock: dropping the last reference to one gives its
  // slot back, which takes the lock. Only this thread marks them busy, so what they answer holds
  // until the slot is taken below.
  for (const Candidate& candidate : candidates) {
    const std::shared_ptr<Evictable> connection = candidate.connection.lock();
    if (!connection || connection->has_input()) continue;
    std::optional<Ticket> ticket;
    {
      std::lock_guard lock(mutex_);
      ticket = take_from_locked(candidate);
    }
    if (!ticket) continue;  // no longer waiting as listed
    connection->evict();
    return ticket;
  }
  std::lock_guard lock(mutex_);  // a slot given back meanwhile
  if (holders_.size() < limit_) return add_holder_locked();
  return std::nullopt;
}

void ConnectionSlots::waiting(Ticket ticket, Wait wait, std::weak_ptr<Evictable> connection) {
  std::lock_guard lock(mutex_);
  const auto holder = holders_.find(ticket);
  if (holder == holders_.end()) return;
  if (holder->second.wait) waiting_.erase(holder->second.since);
  holder->second.connection = std::move(connection);
  holder->second.wait = wait;
  holder->second.since = next_wait_++;
  waiting_.emplace(holder->second.since, ticket);
}

void ConnectionSlots::busy(Ticket ticket) {
  std::lock_guard lock(mutex_);
  const auto holder = holders_.find(ticket);
  if (holder == holders_.end() || !holder->second.wait) return;
  waiting_.erase(holder->second.since);
  holder->second.wait.reset();
}

void ConnectionSlots::give_back(Ticket ticket) {
  std::lock_guard lock(mutex_);
  const auto holder = holders_.find(ticket);
  if (holder == holders_.end()) return;  // evicted: its slot went to another connection
  if (holder->second.wait) waiting_.erase(holder->second.since);
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
