// The subcommands of the gradgate binary, one file each. Each adds itself to the app; its callback
// sets `exit_code` when it fails.
#pragma once

#include <CLI/CLI.hpp>

namespace gradgate::cli {

void add_version_command(CLI::App& app);
void add_bench_command(CLI::App& app, int& exit_code);
void add_gateway_command(CLI::App& app, int& exit_code);
void add_control_command(CLI::App& app, int& exit_code);
void add_validate_command(CLI::App& app, int& exit_code);

}  // namespace gradgate::cli
