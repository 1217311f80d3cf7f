#include <iostream>
#include <memory>

#include "commands.h"
#include "config_options.h"
#include "gateway/config/gateway_config.h"
#include "gateway/telemetry/daemon.h"

namespace gradgate::cli {

using gradgate::Status;

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
