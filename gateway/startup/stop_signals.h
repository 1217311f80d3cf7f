// SIGINT and SIGTERM stop the daemon. They are blocked in every thread (block_stop_signals before
// the first thread starts), so only the waits here receive them, never a thread by chance.
#pragma once

#include <chrono>
#include <functional>

namespace gradgate::gateway {

/// Blocks SIGINT, SIGTERM and SIGPIPE in the calling thread and the threads it starts.
void block_stop_signals();

/// Waits up to `pause` for a stop signal: false once one came.
bool pause_unless_stopped(std::chrono::milliseconds pause);

/// Waits for a stop signal, calling `every_interval` each `interval_seconds` (0: never).
void wait_for_stop_signal(double interval_seconds, const std::function<void()>& every_interval);

}  // namespace gradgate::gateway
