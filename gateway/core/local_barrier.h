// The local workers' requests for one tensor's steps: which workers asked for the next step,
// which take part in the running one, which left, and when the next step may start. A step starts
// once every local worker asked and the step before ended; it cannot complete without a worker
// that left after declaring the tensor (`departed`), so the next request fails at once instead
// of at collective.timeout_ms. Not thread-safe: the step runner guards it with its lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "gateway/ingress/ingress.h"

namespace gradgate::gateway {

class LocalBarrier {
 public:
  using Done = std::function<void(AllreduceOutcome)>;
  using Clock = std::chrono::steady_clock;

  explicit LocalBarrier(uint32_t local_workers);

  /// Whether local worker `rank` asked for a step that has not ended.
  bool has_request(uint32_t rank) const { return waiting_[rank] || in_step_[rank]; }
  /// How many local workers asked for the next step.
  size_t waiting() const;
  uint32_t local_workers() const { return static_cast<uint32_t>(waiting_.size()); }
  /// Worker `rank` asks for the next step; `done` completes its request.
  void ask(uint32_t rank, Done done);
  /// A worker that left (or released the tensor) after declaring it and is not back.
  std::optional<uint32_t> departed() const;
  /// Worker `rank` declared the tensor (again): it is back, if it had left.
  void rejoined(uint32_t rank) { departed_[rank] = false; }
  /// Worker `rank` left or released the tensor; `had_buffer`: it had declared it. Its requests
  /// are dropped (its session is gone, or it has none).
  void detach(uint32_t rank, bool had_buffer);

  bool running() const { return running_; }
  /// The step the next requests take part in.
  uint64_t next_step() const { return next_step_; }
  /// When every local worker asked and no step runs: the next step, which begins (the waiting
  /// requests take part in it).
  std::optional<uint64_t> begin_step();
  /// begin_step() taken back: the step did not start.
  void undo_begin(uint64_t step);
  /// The running step ended: the requests that took part in it, to complete.
  std::vector<Done> end_step();
  /// The next step fails without running: its number, and the requests waiting for it.
  std::pair<uint64_t, std::vector<Done>> skip_step();

  /// A worker of the running step that left after asking (its gradient is gone).
  std::optional<uint32_t> left_step() const;
  /// By local rank: whether the worker still takes part in the running step.
  std::vector<bool> in_step() const;
  /// Local workers asked for the next step, which has not begun, the first `timeout` or more ago.
  bool overdue(Clock::time_point now, std::chrono::milliseconds timeout) const;
  /// From the first to the last local worker's request of the running step: a straggler's lag.
  double step_spread_seconds() const { return step_spread_.count(); }

 private:
  std::vector<Done> waiting_;  // by local rank: asked for the next step
  std::vector<Done> in_step_;  // by local rank: taking part in the running step
  std::vector<bool> departed_;
  uint64_t next_step_ = 0;
  bool running_ = false;
  Clock::time_point first_waiting_;  // when the next step's first worker asked
  std::chrono::duration<double> waiting_spread_{}, step_spread_{};
};

}  // namespace gradgate::gateway
