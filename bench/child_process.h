// A program run as a child process (gateways of a local job, test workers): started with
// posix_spawn, its stdout and stderr appended to a log file, killed and reaped by the destructor at
// the latest.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gradgate::bench {

class ChildProcess {
 public:
  ChildProcess(const std::string& program, const std::vector<std::string>& args,
               const std::string& log_path);
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  bool running();
  /// Sends `signal` (SIGKILL, SIGTERM, SIGSTOP...).
  void signal(int signal);
  /// The exit code (128 + signal if killed), waiting up to `timeout`; -1 if it still runs.
  int wait_exit(std::chrono::milliseconds timeout);
  const std::string& log_path() const { return log_path_; }
  std::string log() const;
  /// The CPU time (user + system, /proc/<pid>/stat) the process has spent so far; 0 once reaped.
  double cpu_seconds() const;

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int exit_code_ = -1;
  std::string log_path_;
};

/// The path of `name` in the first directory of $PATH that holds it; "" if none does.
std::string find_program(const std::string& name);

/// The JSON object a daemon writes to its ready file (`gradgate gateway|control --ready-file`),
/// once `path` exists. Throws std::runtime_error with the process's log if it exits first or
/// `limit` passes.
nlohmann::json wait_for_ready_file(const std::string& path, ChildProcess& process,
                                   std::chrono::seconds limit = std::chrono::seconds(30));

}  // namespace gradgate::bench
