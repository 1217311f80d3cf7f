// The controller as a process serves it: the Controller behind its REST API, the probes and
// /metrics on one HTTP server, built from a ControlConfig. What `gradgate control -c FILE` runs;
// tests start it in-process on port 0.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "control/config/control_config.h"
#include "gradgate/base/status.h"

namespace gradgate::control {

class ControlServer {
 public:
  /// Reads the token (auth.token_file, else the variable auth.token_env; neither: no
  /// authentication, with a warning) and builds the server. Errors: the token file cannot be
  /// read or holds no valid token; the policy settings are refused.
  static Result<std::unique_ptr<ControlServer>> make(const ControlConfig& config);
  ~ControlServer();  // stop()

  /// Listens on server.listen. Errors: the address is bad or in use.
  Status start();
  /// Stops serving; pending long polls are dropped. Idempotent.
  void stop();
  /// The bound port, once started.
  uint16_t port() const;

 private:
  struct Parts;
  explicit ControlServer(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

/// Sets spdlog's level and format (text, or one JSON object per line) from log.level, log.format.
void configure_logging(const ControlConfig& config);

/// Runs the controller until SIGINT or SIGTERM. When `ready_file` is not empty, writes
/// {"port": N} there (to PATH.tmp, then renamed) once the server listens.
Status run_controller(const ControlConfig& config, const std::string& ready_file);

}  // namespace gradgate::control
