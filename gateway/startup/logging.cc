#include "gateway/startup/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <string>

namespace gradgate::gateway {

void set_log_pattern(const GatewayConfig& config) {
  const std::string rank =
      config.node_rank_auto ? std::string("\"?\"") : std::to_string(config.node_rank);
  if (config.log_format == "json") {
    spdlog::set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","rank":)" + rank + R"(,"msg":"%v"})",
        spdlog::pattern_time_type::utc);
  } else {
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [gateway " + rank + "] %v");
  }
}

void configure_logging(const GatewayConfig& config) {
  auto logger = spdlog::stderr_color_mt("gradgate");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  set_log_pattern(config);
}

}  // namespace gradgate::gateway
