// The outcome of one all-reduce request made to the gateway core in a test: the callback to hand
// to on_allreduce, and a bounded wait for it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>

#include "gateway/ingress/ingress.h"

namespace gradgate::gateway::testing {

class Outcome {
 public:
  std::function<void(AllreduceOutcome)> callback() {
    return [this](AllreduceOutcome outcome) {
      std::lock_guard lock(mutex_);
      outcome_ = std::move(outcome);
      changed_.notify_all();
    };
  }
  std::optional<AllreduceOutcome> wait(std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, limit, [&] { return outcome_.has_value(); });
    return outcome_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<AllreduceOutcome> outcome_;
};

}  // namespace gradgate::gateway::testing
