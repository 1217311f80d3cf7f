#include "child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace gradgate::bench {

ChildProcess::ChildProcess(const std::string& program, const std::vector<std::string>& args,
                           const std::string& log_path)
    : log_path_(log_path) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  const int failed = posix_spawn(&pid_, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (failed != 0) throw std::runtime_error("cannot start " + program);
}

ChildProcess::~ChildProcess() {
  if (!reaped_) {
    ::kill(pid_, SIGKILL);
    wait_exit(std::chrono::seconds(10));
  }
}

bool ChildProcess::running() { return wait_exit(std::chrono::milliseconds(0)) == -1; }

void ChildProcess::signal(int signal) {
  if (!reaped_) ::kill(pid_, signal);
}

int ChildProcess::wait_exit(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!reaped_) {
    int status = 0;
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      reaped_ = true;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // polling a child, bounded
  }
  return exit_code_;
}

std::string ChildProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

double ChildProcess::cpu_seconds() const {
  if (reaped_) return 0.0;
  std::ifstream in("/proc/" + std::to_string(pid_) + "/stat");
  std::string stat(std::istreambuf_iterator<char>(in), {});
  // After the command name in parentheses (which may hold spaces): fields 3 (state) onwards.
  const size_t name_end = stat.rfind(')');
  if (name_end == std::string::npos) return 0.0;
  std::istringstream fields(stat.substr(name_end + 1));
  std::string field;
  for (int i = 3; i < 14; ++i) fields >> field;  // state .. cmajflt
  unsigned long long user = 0, system = 0;
  fields >> user >> system;
  return static_cast<double>(user + system) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

std::string find_program(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = dir + "/" + name;
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

nlohmann::json wait_for_ready_file(const std::string& path, ChildProcess& process,
                                   std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::filesystem::exists(path)) {
      std::ifstream in(path);
      return nlohmann::json::parse(in);
    }
    if (!process.running()) {
      throw std::runtime_error("process exited before it was ready:\n" + process.log());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling a file, bounded
  }
  throw std::runtime_error("process not ready within " + std::to_string(limit.count()) + " s:\n" +
                           process.log());
}

}  // namespace gradgate::bench
