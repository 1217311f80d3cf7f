// gradgate: one binary, one subcommand per job.
//   gradgate gateway -c gateway.yaml [--set section.key=value ...] [--ready-file PATH]
//   gradgate control -c control.yaml [--set section.key=value ...] [--ready-file PATH]
//   gradgate validate [--control] -c FILE [--set section.key=value ...]
//   gradgate bench codecs [--codecs SPEC...] [--sizes N...] [--dists KIND...] [--json]
//   gradgate bench allreduce [--sizes BYTES...] [--codecs SPEC...] [--gateways P...] [--json]
//   gradgate bench node [--sizes BYTES...] [--local-workers W...] [--tensors T] [--json]
//   gradgate version
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"gradgate: gradient-compression gateway for distributed training"};
  app.require_subcommand(1);
  int exit_code = 0;
  gradgate::cli::add_gateway_command(app, exit_code);
  gradgate::cli::add_control_command(app, exit_code);
  gradgate::cli::add_validate_command(app, exit_code);
  gradgate::cli::add_bench_command(app, exit_code);
  gradgate::cli::add_version_command(app);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
