#include <iostream>
#include <memory>

#include "commands.h"
#include "config_options.h"
#include "gateway/config/gateway_config.h"

namespace gradgate::cli {

void add_validate_command(CLI::App& app, int& exit_code) {
  auto* validate = app.add_subcommand(
      "validate", "Check a gateway configuration and print every error with its key path");
  auto options = std::make_shared<ConfigOptions>();
  options->add_to(*validate);
  validate->callback([options, &exit_code] {
    auto config = gateway::load_gateway_config(options->path, options->overrides);
    if (!config.ok()) {
      std::cerr << config.status().message() << "\n";
      exit_code = 1;
      return;
    }
    std::cout << options->path << ": ok\n";
  });
}

}  // namespace gradgate::cli
