#include "gateway/startup/stop_signals.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cmath>

namespace gradgate::gateway {
namespace {

sigset_t stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  return signals;
}

}  // namespace

void block_stop_signals() {
  sigset_t blocked = stop_signals();
  sigaddset(&blocked, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &blocked, nullptr);
}

bool pause_unless_stopped(std::chrono::milliseconds pause) {
  const sigset_t signals = stop_signals();
  timespec timeout{static_cast<time_t>(pause.count() / 1000),
                   static_cast<long>(pause.count() % 1000) * 1000000L};
  const int signal = sigtimedwait(&signals, nullptr, &timeout);
  return signal != SIGINT && signal != SIGTERM;
}

void wait_for_stop_signal(double interval_seconds, const std::function<void()>& every_interval) {
  const sigset_t signals = stop_signals();
  const double wait = interval_seconds > 0 ? interval_seconds : 3600.0;
  timespec timeout{static_cast<time_t>(wait), static_cast<long>((wait - std::floor(wait)) * 1e9)};
  for (;;) {
    const int signal = sigtimedwait(&signals, nullptr, &timeout);
    if (signal == SIGINT || signal == SIGTERM) {
      spdlog::info("signal {}: stopping", signal);
      return;
    }
    if (signal < 0 && errno == EAGAIN && interval_seconds > 0) every_interval();
  }
}

}  // namespace gradgate::gateway
