#include <iostream>
#include <memory>

#include "commands.h"
#include "config_options.h"
#include "control/api/settings_file.h"
#include "control/config/control_config.h"
#include "gateway/config/gateway_config.h"

namespace gradgate::cli {
namespace {

// A controller's file, and the settings it would start with from its policy.settings_file.
Status check_control(const ConfigOptions& options) {
  auto config = control::load_control_config(options.path, options.overrides);
  if (!config.ok()) return config.status();
  return control::stored_settings(*config).status();
}

}  // namespace

void add_validate_command(CLI::App& app, int& exit_code) {
  auto* validate = app.add_subcommand(
      "validate",
      "Check a gateway configuration (or with --control a controller's) and print every error "
      "with its key path");
  auto options = std::make_shared<ConfigOptions>();
  auto controller = std::make_shared<bool>(false);
  options->add_to(*validate, "Configuration (YAML)");
  validate->add_flag("--control", *controller,
                     "The file is a controller configuration (gradgate control -c FILE)");
  validate->callback([options, controller, &exit_code] {
    const Status status =
        *controller ? check_control(*options)
                    : gateway::load_gateway_config(options->path, options->overrides).status();
    if (status.ok()) {
      std::cout << options->path << ": ok\n";
      return;
    }
    std::cerr << status.message() << "\n";
    if (!*controller && control::load_control_config(options->path, options->overrides).ok()) {
      std::cerr << options->path
                << " is a controller configuration, and a valid one: check it with "
                   "gradgate validate --control\n";
    }
    exit_code = 1;
  });
}

}  // namespace gradgate::cli
