#include "gateway/ingress/completion_queue.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace gradgate::gateway {

Result<std::shared_ptr<CompletionQueue>> CompletionQueue::create() {
  const int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) {
    return Status(ErrorCode::kResourceExhausted, std::string("eventfd: ") + std::strerror(errno));
  }
  return std::make_shared<CompletionQueue>(fd);
}

CompletionQueue::~CompletionQueue() { close(event_fd_); }

void CompletionQueue::push(Completion completion) {
  {
    std::lock_guard lock(mu_);
    queued_.push_back(std::move(completion));
  }
  wake();
}

void CompletionQueue::wake() {
  const uint64_t one = 1;
  // The counter cannot overflow in practice; a failed write only means it is already non-zero.
  [[maybe_unused]] const ssize_t n = write(event_fd_, &one, sizeof one);
}

std::vector<Completion> CompletionQueue::drain() {
  uint64_t count = 0;
  [[maybe_unused]] const ssize_t n = read(event_fd_, &count, sizeof count);
  std::lock_guard lock(mu_);
  return std::exchange(queued_, {});
}

}  // namespace gradgate::gateway
