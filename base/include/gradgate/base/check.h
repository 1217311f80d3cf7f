// Debug assertions for invariants of the code itself (never for input, which gets a Status):
// checked in debug builds and in the sanitizer builds of the tests, compiled out of release
// builds (the condition is still compiled, so it cannot rot).
#pragma once

#if !defined(NDEBUG) || defined(GRADGATE_ENABLE_DCHECK)
#define GRADGATE_DCHECK_IS_ON 1
#else
#define GRADGATE_DCHECK_IS_ON 0
#endif

namespace gradgate::base_internal {

/// Prints "file:line: invariant broken: condition (what)" to stderr and aborts.
[[noreturn]] void dcheck_failed(const char* condition, const char* file, int line,
                                const char* what);

}  // namespace gradgate::base_internal

/// Aborts with `what` when `condition` is false, where debug assertions are on.
#define GRADGATE_DCHECK(condition, what)                                              \
  do {                                                                                \
    if (GRADGATE_DCHECK_IS_ON && !(condition)) {                                      \
      ::gradgate::base_internal::dcheck_failed(#condition, __FILE__, __LINE__, what); \
    }                                                                                 \
  } while (0)
