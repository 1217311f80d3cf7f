#include "control/service/long_polls.h"

#include <algorithm>

namespace gradgate::control {

LongPolls::LongPolls(std::function<void()> tick, std::chrono::milliseconds tick_interval)
    : tick_(std::move(tick)), tick_interval_(tick_interval), thread_([this] { run(); }) {}

LongPolls::~LongPolls() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void LongPolls::wait(uint64_t job_id, Clock::time_point deadline, Answer answer) {
  {
    std::lock_guard lock(mutex_);
    waiters_.push_back({job_id, deadline, std::move(answer)});
  }
  changed_.notify_all();
}

void LongPolls::wake(uint64_t job_id) {
  std::vector<Waiter> woken;
  {
    std::lock_guard lock(mutex_);
    woken = take([job_id](const Waiter& waiter) { return waiter.job_id == job_id; });
  }
  for (Waiter& waiter : woken) waiter.answer();
}

std::size_t LongPolls::waiting() const {
  std::lock_guard lock(mutex_);
  return waiters_.size();
}

std::vector<LongPolls::Waiter> LongPolls::take(const std::function<bool(const Waiter&)>& due) {
  std::vector<Waiter> taken;
  const auto kept = std::stable_partition(waiters_.begin(), waiters_.end(),
                                          [&](const Waiter& waiter) { return !due(waiter); });
  std::move(kept, waiters_.end(), std::back_inserter(taken));
  waiters_.erase(kept, waiters_.end());
  return taken;
}

void LongPolls::run() {
  Clock::time_point next_tick = Clock::now();
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    const Clock::time_point now = Clock::now();
    std::vector<Waiter> expired =
        take([now](const Waiter& waiter) { return waiter.deadline <= now; });
    const bool tick_due = now >= next_tick;
    if (tick_due) next_tick = now + tick_interval_;
    if (!expired.empty() || tick_due) {
      lock.unlock();
      for (Waiter& waiter : expired) waiter.answer();
      if (tick_due && tick_) tick_();
      lock.lock();
      continue;
    }
    Clock::time_point wake_at = next_tick;
    for (const Waiter& waiter : waiters_) wake_at = std::min(wake_at, waiter.deadline);
    changed_.wait_until(lock, wake_at);
  }
}

}  // namespace gradgate::control
