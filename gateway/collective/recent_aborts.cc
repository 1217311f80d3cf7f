#include "gateway/collective/recent_aborts.h"

#include <utility>

namespace gradgate::gateway {

RecentAborts::RecentAborts(uint32_t nodes, std::chrono::milliseconds keep_for)
    : keep_for_(keep_for), kept_(nodes) {}

void RecentAborts::expire_locked(std::deque<Kept>& kept, Clock::time_point now) {
  while (!kept.empty() && kept.front().until <= now) kept.pop_front();
}

void RecentAborts::keep(uint32_t rank, Message message, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (rank >= kept_.size()) return;
  auto& kept = kept_[rank];
  expire_locked(kept, now);
  if (kept.size() >= kMaxPerPeer) kept.pop_front();
  kept.push_back({std::move(message), now + keep_for_});
}

std::vector<Message> RecentAborts::kept(uint32_t rank, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  std::vector<Message> messages;
  if (rank >= kept_.size()) return messages;
  expire_locked(kept_[rank], now);
  for (const Kept& kept : kept_[rank]) messages.push_back(kept.message);
  return messages;
}

}  // namespace gradgate::gateway
