#include "controller_process.h"

#include <stdlib.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace gradgate::gateway::testing {

ControllerProcess::ControllerProcess() {
  std::string pattern = std::filesystem::temp_directory_path() / "gradgate-control-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = pattern;
}

ControllerProcess::~ControllerProcess() {
  stop(SIGTERM);
  std::filesystem::remove_all(dir_);
}

void ControllerProcess::start(const std::string& codec, const std::string& policy) {
  const std::string config = dir_ + "/control.yaml";
  std::ofstream out(config, std::ios::trunc);
  out << "server:\n  listen: \"127.0.0.1:" << port_ << "\"\n"
      << "nodes:\n  report_interval_ms: 200\n  stale_after_ms: 2000\n"
      << "policy:\n  policy: " << policy << "\n  default_codec: \"" << codec << "\"\n"
      << "  min_interval_ms: 0\n";
  if (!token_.empty()) {
    std::ofstream(dir_ + "/token", std::ios::trunc) << token_;
    out << "auth:\n  token_file: \"" << dir_ << "/token\"\n";
  }
  out.close();
  const std::string ready = dir_ + "/control.ready";
  std::filesystem::remove(ready);
  process_ = std::make_unique<bench::ChildProcess>(
      GRADGATE_BINARY, std::vector<std::string>{"control", "-c", config, "--ready-file", ready},
      dir_ + "/control.log");
  port_ = bench::wait_for_ready_file(ready, *process_, std::chrono::seconds(20))
              .at("port")
              .get<uint16_t>();
}

void ControllerProcess::stop(int signal) {
  if (!process_) return;
  process_->signal(signal);
  process_->wait_exit(std::chrono::milliseconds(10000));
  process_.reset();
}

std::string ControllerProcess::log() const { return process_ ? process_->log() : ""; }

}  // namespace gradgate::gateway::testing
