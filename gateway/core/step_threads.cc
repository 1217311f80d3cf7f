#include "gateway/core/step_threads.h"

#include <utility>

namespace gradgate::gateway {

StepThreads::~StepThreads() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

void StepThreads::run(std::function<void()> task) {
  std::unique_lock lock(mutex_);
  tasks_.push_back(std::move(task));
  if (idle_ >= tasks_.size()) {
    lock.unlock();
    wake_.notify_one();
    return;
  }
  try {
    threads_.emplace_back([this] { serve(); });
  } catch (...) {
    tasks_.pop_back();
    throw;
  }
}

size_t StepThreads::threads() const {
  std::lock_guard lock(mutex_);
  return threads_.size();
}

void StepThreads::serve() {
  std::unique_lock lock(mutex_);
  while (true) {
    ++idle_;
    wake_.wait(lock, [this] { return !tasks_.empty() || stopping_; });
    --idle_;
    if (tasks_.empty()) return;  // stopping, nothing left to run
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

}  // namespace gradgate::gateway
