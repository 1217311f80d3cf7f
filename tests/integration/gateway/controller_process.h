// A `gradgate control` process for tests: a policy (static by default) with a given codec, on a
// port that stays the same when it is stopped and started again (the gateways keep its address).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "child_process.h"

namespace gradgate::gateway::testing {

class ControllerProcess {
 public:
  /// Makes its own temporary directory (config, ready file, log).
  ControllerProcess();
  ~ControllerProcess();  // stops it with SIGTERM, removes the directory
  ControllerProcess(const ControllerProcess&) = delete;
  ControllerProcess& operator=(const ControllerProcess&) = delete;

  /// Starts it with `policy` and `codec` as its default codec (static: every tensor's) and waits
  /// until it listens (throws after 20 s).
  void start(const std::string& codec, const std::string& policy = "static");
  /// From the next start(): writes need `token` (auth.token_file; "": no token, the default).
  void require_token(const std::string& token) { token_ = token; }
  /// Stops it with `signal` (SIGKILL: as if it crashed).
  void stop(int signal);

  uint16_t port() const { return port_; }
  std::string url() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string log() const;

 private:
  std::string dir_;
  uint16_t port_ = 0;
  std::string token_;
  std::unique_ptr<bench::ChildProcess> process_;
};

}  // namespace gradgate::gateway::testing
