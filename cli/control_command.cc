#include <iostream>
#include <memory>

#include "commands.h"
#include "config_options.h"
#include "control/config/control_config.h"
#include "control/server/control_server.h"

namespace gradgate::cli {

void add_control_command(CLI::App& app, int& exit_code) {
  auto* command = app.add_subcommand("control", "Run the controller (control plane REST API)");
  auto options = std::make_shared<ConfigOptions>();
  auto ready_file = std::make_shared<std::string>();
  options->add_to(*command, "Controller configuration (YAML)");
  command->add_option("--ready-file", *ready_file,
                      "Write {\"port\": N} as JSON here once the server listens");
  command->callback([options, ready_file, &exit_code] {
    auto config = control::load_control_config(options->path, options->overrides);
    if (!config.ok()) {
      std::cerr << config.status().message() << "\n";
      exit_code = 1;
      return;
    }
    control::configure_logging(*config);
    const Status ran = control::run_controller(*config, *ready_file);
    if (!ran.ok()) {
      std::cerr << "gradgate control: " << ran.to_string() << "\n";
      exit_code = 1;
    }
  });
}

}  // namespace gradgate::cli
