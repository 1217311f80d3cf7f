// A resource limit of this process lowered for a test's scope (setrlimit), and restored after it
// even when an assertion ends the test early.
#pragma once

#include <sys/resource.h>

namespace gradgate::testing {

class ScopedLimit {
 public:
  /// Lowers the soft limit of `resource` (RLIMIT_NOFILE, RLIMIT_AS, ...) to `soft`.
  ScopedLimit(int resource, rlim_t soft) : resource_(resource) {
    getrlimit(resource_, &saved_);
    rlimit lowered = saved_;
    lowered.rlim_cur = soft;
    setrlimit(resource_, &lowered);
  }
  ~ScopedLimit() { setrlimit(resource_, &saved_); }
  ScopedLimit(const ScopedLimit&) = delete;
  ScopedLimit& operator=(const ScopedLimit&) = delete;

 private:
  int resource_;
  rlimit saved_{};
};

}  // namespace gradgate::testing
