#include "worker_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

namespace gradgate::gateway::testing {

WorkerProcess::WorkerProcess(const std::vector<std::string>& args, const std::string& program) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) std::abort();
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  pid_ = fork();
  if (pid_ < 0) std::abort();
  if (pid_ == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    execv(program.c_str(), argv.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  stdout_fd_ = pipe_fds[0];
}

WorkerProcess::~WorkerProcess() {
  if (!reaped_) {
    kill_now();
    wait_exit(std::chrono::seconds(10));
  }
  close(stdout_fd_);
}

bool WorkerProcess::wait_for_line(const std::string& line, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (const size_t end = buffered_.find('\n'); end != std::string::npos) {
      const std::string got = buffered_.substr(0, end);
      buffered_.erase(0, end + 1);
      if (got == line) return true;
      continue;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{stdout_fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char chunk[256];
    const ssize_t n = read(stdout_fd_, chunk, sizeof chunk);
    if (n <= 0) return false;  // the worker ended
    buffered_.append(chunk, static_cast<size_t>(n));
  }
}

void WorkerProcess::kill_now() {
  if (!reaped_) kill(pid_, SIGKILL);
}

int WorkerProcess::wait_exit(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!reaped_) {
    int status = 0;
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      reaped_ = true;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) return -1;
    // Wake when the child's stdout closes (it exited) or after a short bounded wait.
    pollfd p{stdout_fd_, POLLIN, 0};
    poll(&p, 1, 10);
    if (p.revents & POLLIN) {
      char chunk[256];
      const ssize_t n = read(stdout_fd_, chunk, sizeof chunk);
      if (n > 0) buffered_.append(chunk, static_cast<size_t>(n));
    }
  }
  return exit_code_;
}

}  // namespace gradgate::gateway::testing
