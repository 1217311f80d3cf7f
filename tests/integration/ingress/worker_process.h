// Runs gradgate_test_worker (or another test program) as a child process (fork + exec) with its
// stdout on a pipe, for tests that need a real process: one that is killed, or several workers with
// their own address spaces.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace gradgate::gateway::testing {

class WorkerProcess {
 public:
  /// Starts `program` (gradgate_test_worker by default) with `args` (after the program name).
  /// Aborts the test binary if fork fails.
  explicit WorkerProcess(const std::vector<std::string>& args,
                         const std::string& program = GRADGATE_TEST_WORKER);
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;
  /// Kills the child if it still runs, and reaps it.
  ~WorkerProcess();

  /// Reads stdout until a line equal to `line` or `timeout`; false if it did not come.
  bool wait_for_line(const std::string& line, std::chrono::milliseconds timeout);
  void kill_now();
  /// The exit code (or 128 + signal), waiting up to `timeout`; -1 if it did not end.
  int wait_exit(std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffered_;
  bool reaped_ = false;
  int exit_code_ = -1;
};

}  // namespace gradgate::gateway::testing
