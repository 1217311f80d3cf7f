#include <iostream>
#include <memory>

#include "commands.h"
#include "config_options.h"
#include "gateway/config/gateway_config.h"
#include "gateway/startup/daemon.h"
#include "gateway/startup/logging.h"

namespace gradgate::cli {

using gradgate::Status;

namespace {

// Seconds between summary lines: 0 (none) to a day. CLI::Range would let NaN through, and an
// infinite interval is no timeout the signal wait can take.
const CLI::Validator kStatsInterval(
    [](std::string& input) -> std::string {
      double seconds = 0;
      if (CLI::detail::lexical_cast(input, seconds) && seconds >= 0 && seconds <= 86400) return {};
      return "must be 0..86400 seconds, got " + input;
    },
    "0..86400");

}  // namespace

void add_gateway_command(CLI::App& app, int& exit_code) {
  auto* command = app.add_subcommand("gateway", "Run the node-local gateway daemon");
  auto options = std::make_shared<ConfigOptions>();
  auto daemon = std::make_shared<gateway::DaemonOptions>();
  options->add_to(*command);
  command->add_option("--ready-file", daemon->ready_file,
                      "Write {port, socket, rank} as JSON here once serving");
  command
      ->add_option("--stats-interval", daemon->stats_interval_seconds,
                   "Seconds between summary log lines (0: none)")
      ->check(kStatsInterval)
      ->capture_default_str();
  command->callback([options, daemon, &exit_code] {
    auto config = gateway::load_gateway_config(options->path, options->overrides);
    if (!config.ok()) {
      std::cerr << config.status().message() << "\n";
      exit_code = 1;
      return;
    }
    gateway::configure_logging(*config);
    Status ran = gateway::run_daemon(*config, *daemon);
    if (!ran.ok()) {
      std::cerr << "gradgate gateway: " << ran.to_string() << "\n";
      exit_code = 1;
    }
  });
}

}  // namespace gradgate::cli
