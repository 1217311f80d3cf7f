// The long polls of GET /v1/policy that wait for a job's next policy version: each waiter is
// answered when its job gets a new version (wake) or at its deadline, whichever comes first. A
// thread of its own watches the deadlines, so that waiting never holds the HTTP server's I/O
// thread; the same thread runs a periodic `tick` (the controller refreshes its gauges there).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gradgate::control {

class LongPolls {
 public:
  using Clock = std::chrono::steady_clock;
  /// Answers one waiter (sends it the job's current policy). Called at most once, without any
  /// lock of LongPolls held, on the thread of wake() or on the deadline thread.
  using Answer = std::function<void()>;

  LongPolls(std::function<void()> tick, std::chrono::milliseconds tick_interval);
  /// Stops the deadline thread and drops the waiters unanswered.
  ~LongPolls();
  LongPolls(const LongPolls&) = delete;
  LongPolls& operator=(const LongPolls&) = delete;

  /// Registers a waiter of `job_id` until `deadline`.
  void wait(uint64_t job_id, Clock::time_point deadline, Answer answer);
  /// Answers every waiter of `job_id` now.
  void wake(uint64_t job_id);
  /// Waiters not answered yet.
  std::size_t waiting() const;

 private:
  struct Waiter {
    uint64_t job_id;
    Clock::time_point deadline;
    Answer answer;
  };

  void run();
  /// Removes the waiters that `due` selects and returns them (the caller holds the lock).
  std::vector<Waiter> take(const std::function<bool(const Waiter&)>& due);

  const std::function<void()> tick_;
  const std::chrono::milliseconds tick_interval_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Waiter> waiters_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gradgate::control
