#include "gateway/startup/stop_signals.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>

namespace gradgate::gateway {
namespace {

sigset_t stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  return signals;
}

// Waits up to `timeout` for SIGINT or SIGTERM: the signal, or -1 when none came (errno EAGAIN
// once the time passed).
int wait_for_stop(std::chrono::nanoseconds timeout) {
  const sigset_t signals = stop_signals();
  const auto seconds = std::chrono::floor<std::chrono::seconds>(timeout);
  const timespec wait{static_cast<time_t>(seconds.count()),
                      static_cast<long>((timeout - seconds).count())};
  return sigtimedwait(&signals, nullptr, &wait);
}

bool is_stop(int signal) { return signal == SIGINT || signal == SIGTERM; }

}  // namespace

void block_stop_signals() {
  sigset_t blocked = stop_signals();
  sigaddset(&blocked, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &blocked, nullptr);
}

bool pause_unless_stopped(std::chrono::milliseconds pause) {
  return !is_stop(wait_for_stop(pause));
}

void wait_for_stop_signal(double interval_seconds, const std::function<void()>& every_interval) {
  const auto interval = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(interval_seconds > 0 ? interval_seconds : 3600.0));
  for (;;) {
    const int signal = wait_for_stop(interval);
    if (is_stop(signal)) {
      spdlog::info("signal {}: stopping", signal);
      return;
    }
    if (signal < 0 && errno == EAGAIN && interval_seconds > 0) every_interval();
  }
}

}  // namespace gradgate::gateway
