// The threads the gateway's all-reduce steps run on: a step takes an idle thread, or a new one
// when every thread is busy, and the thread waits for the next step when it is done. There are
// never fewer threads than running steps (a step blocks on its peers, so a fixed pool could wait
// on itself), and about as many as the most steps that ever ran at once (at most one per
// tensor), plus the odd thread made while another was still on its way back from its step.
//
// Threads outlive their steps so that what a thread builds on first use stays for the next
// step: the CUDA codecs keep their scratch memory, page-locked tally and cuBLAS handle per thread
// and GPU, and a thread per step would allocate and free them (and synchronise the GPU) at every
// step.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gradgate::gateway {

class StepThreads {
 public:
  StepThreads() = default;
  /// Joins every thread: the tasks given to run() must have returned (or return soon).
  ~StepThreads();
  StepThreads(const StepThreads&) = delete;
  StepThreads& operator=(const StepThreads&) = delete;

  /// Runs `task` on an idle thread, or on a new one. Throws std::system_error when a needed
  /// thread cannot be made (the task is then not run).
  void run(std::function<void()> task);

  /// Threads made so far (idle or busy).
  size_t threads() const;

 private:
  void serve();

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  size_t idle_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace gradgate::gateway
