#include "gateway/collective/pending_aborts.h"

#include <utility>

namespace gradgate::gateway {

PendingAborts::PendingAborts(uint32_t nodes, std::chrono::milliseconds keep_for)
    : keep_for_(keep_for), held_(nodes) {}

void PendingAborts::hold(uint32_t rank, Message message, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (rank >= held_.size()) return;
  auto& held = held_[rank];
  while (!held.empty() && (held.front().until <= now || held.size() >= kMaxPerPeer)) {
    held.pop_front();
  }
  held.push_back({std::move(message), now + keep_for_});
}

std::vector<Message> PendingAborts::take(uint32_t rank, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  std::vector<Message> messages;
  if (rank >= held_.size()) return messages;
  for (Held& held : held_[rank]) {
    if (held.until > now) messages.push_back(std::move(held.message));
  }
  held_[rank].clear();
  return messages;
}

}  // namespace gradgate::gateway
