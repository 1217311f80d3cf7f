// The options that name a configuration, shared by `gateway`, `control` and `validate`:
// -c FILE and any number of --set section.key=value.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace gradgate::cli {

struct ConfigOptions {
  std::string path;
  std::vector<std::string> overrides;

  void add_to(CLI::App& command, const std::string& description = "Gateway configuration (YAML)") {
    command.add_option("-c,--config", path, description)->required();
    command.add_option("--set", overrides,
                       "Override a key: section.key=value (after GRADGATE_* variables)");
  }
};

}  // namespace gradgate::cli
