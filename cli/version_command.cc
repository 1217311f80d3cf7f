#include <iostream>

#include "commands.h"
#include "gradgate/config.h"

namespace gradgate::cli {

void add_version_command(CLI::App& app) {
  auto* version =
      app.add_subcommand("version", "Print the version and the optional parts built in");
  version->callback([] {
    std::cout << "gradgate " << GRADGATE_VERSION << " (cuda " << GRADGATE_HAVE_CUDA << ", dpdk "
              << GRADGATE_HAVE_DPDK << ")\n"
              << "transports: " << GRADGATE_TRANSPORTS << "\n";
  });
}

}  // namespace gradgate::cli
