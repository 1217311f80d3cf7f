// The hand-over of finished all-reduces from any thread to the ingress server's thread: `push`
// queues an outcome and wakes the server through an eventfd that its poll loop watches. Shared
// (std::shared_ptr) by the server and every pending `done` callback, so a callback that runs after
// its session closed, or after the server stopped, is still safe: its outcome is dropped.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "gateway/ingress/ingress.h"

namespace gradgate::gateway {

/// An all-reduce's outcome on its way to the session that asked for it.
struct Completion {
  uint64_t session_id = 0;
  uint64_t request_id = 0;
  uint32_t key = 0;
  AllreduceOutcome outcome;
};

class CompletionQueue {
 public:
  /// A queue with its eventfd, or why none could be made.
  static Result<std::shared_ptr<CompletionQueue>> create();
  explicit CompletionQueue(int event_fd) : event_fd_(event_fd) {}
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;
  ~CompletionQueue();

  /// The descriptor that becomes readable when there is something to drain or a wake-up.
  int event_fd() const { return event_fd_; }
  void push(Completion completion);
  /// Wakes the server's loop without a completion (to stop it).
  void wake();
  /// Takes everything queued and resets the eventfd.
  std::vector<Completion> drain();

 private:
  const int event_fd_;
  std::mutex mu_;
  std::vector<Completion> queued_;
};

}  // namespace gradgate::gateway
