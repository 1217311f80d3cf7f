// A mutex and its scoped lock that clang's thread-safety analysis (-Wthread-safety) understands:
// state declared GRADGATE_GUARDED_BY(mutex) cannot be touched, nor a function declared
// GRADGATE_REQUIRES(mutex) called, without holding it, and a lock dropped in the middle of a
// function (to wait for a peer, say) is tracked until it is taken again. The macros are empty for
// other compilers; GCC builds the same code unchecked.
#pragma once

#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define GRADGATE_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define GRADGATE_THREAD_ANNOTATION(x)
#endif

#define GRADGATE_CAPABILITY(x) GRADGATE_THREAD_ANNOTATION(capability(x))
#define GRADGATE_SCOPED_CAPABILITY GRADGATE_THREAD_ANNOTATION(scoped_lockable)
#define GRADGATE_GUARDED_BY(x) GRADGATE_THREAD_ANNOTATION(guarded_by(x))
#define GRADGATE_REQUIRES(...) GRADGATE_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define GRADGATE_EXCLUDES(...) GRADGATE_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define GRADGATE_ACQUIRE(...) GRADGATE_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define GRADGATE_RELEASE(...) GRADGATE_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define GRADGATE_RETURN_CAPABILITY(x) GRADGATE_THREAD_ANNOTATION(lock_returned(x))

namespace gradgate {

class GRADGATE_CAPABILITY("mutex") Mutex {
 public:
  void lock() GRADGATE_ACQUIRE() { mutex_.lock(); }
  void unlock() GRADGATE_RELEASE() { mutex_.unlock(); }

 private:
  std::mutex mutex_;
};

/// Holds a Mutex from construction to destruction, unless unlock() lets it go for a while.
class GRADGATE_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mutex) GRADGATE_ACQUIRE(mutex) : mutex_(mutex) { mutex_.lock(); }
  ~MutexLock() GRADGATE_RELEASE() {
    if (held_) mutex_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void lock() GRADGATE_ACQUIRE() {
    mutex_.lock();
    held_ = true;
  }
  void unlock() GRADGATE_RELEASE() {
    held_ = false;
    mutex_.unlock();
  }

 private:
  Mutex& mutex_;
  bool held_ = true;
};

/// Waits on a MutexLock (released while waiting, held again on return, as the analysis assumes).
using CondVar = std::condition_variable_any;

}  // namespace gradgate
