// The options that name a gateway configuration, shared by `gateway` and `validate`:
// -c FILE and any number of --set section.key=value.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace gradgate::cli {

struct ConfigOptions {
  std::string path;
  std::vector<std::string> overrides;

  void add_to(CLI::App& command) {
    command.add_option("-c,--config", path, "Gateway configuration (YAML)")->required();
    command.add_option("--set", overrides,
                       "Override a key: section.key=value (after GRADGATE_* variables)");
  }
};

}  // namespace gradgate::cli
