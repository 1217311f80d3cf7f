// A resource limit of this process lowered for a test's scope (setrlimit), and restored after it
// even when an assertion ends the test early.
#pragma once

#include <sys/resource.h>

namespace gradgate::testing {

/// True in a build under AddressSanitizer or ThreadSanitizer, as GCC and Clang say it: their
/// runtimes need address space for shadow memory and file descriptors of their own (UBSan's memory
/// check opens a pipe), which a limit lowered to just above what the process uses takes away.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizerRuntime = true;
#elif defined(__has_feature)
inline constexpr bool kSanitizerRuntime =
    __has_feature(address_sanitizer) || __has_feature(thread_sanitizer);
#else
inline constexpr bool kSanitizerRuntime = false;
#endif

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
