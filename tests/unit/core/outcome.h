// The outcome of one all-reduce request made to the gateway core in a test: the callback to hand
// to on_allreduce, and a bounded wait for it; and the worker buffer over a test's values.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

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

// The request of `done` completes, successfully, within 20 s.
inline void expect_success(Outcome& done) {
  const auto outcome = done.wait(std::chrono::seconds(20));
  ASSERT_TRUE(outcome.has_value());
  ASSERT_TRUE(outcome->status.ok()) << outcome->status.to_string();
}

// The worker buffer over `values` (fp32).
inline WorkerBuffer buffer_of(std::vector<float>& values) {
  return {reinterpret_cast<std::byte*>(values.data()), values.size() * sizeof(float), {}};
}

}  // namespace gradgate::gateway::testing
