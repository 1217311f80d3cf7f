// Shared by the configuration tests: parsing text with an explicit environment, and
// matchers on the one-problem-per-line error messages.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gateway/config/gateway_config.h"

namespace gradgate::gateway::testing {

/// The smallest valid file: the one required key.
inline constexpr char kMinimalYaml[] = "job:\n  nodes: [\"127.0.0.1:29500\"]\n";

inline Result<GatewayConfig> parse(const std::string& yaml,
                                   const std::map<std::string, std::string>& env = {},
                                   const std::vector<std::string>& overrides = {}) {
  return parse_gateway_config(yaml, "gateway.yaml", env, overrides);
}

/// The lines of a failed parse's message; fails the test when the parse succeeded.
inline std::vector<std::string> error_lines(const Result<GatewayConfig>& result) {
  EXPECT_FALSE(result.ok()) << "expected the configuration to be rejected";
  std::vector<std::string> lines;
  std::istringstream text(result.status().message());
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  return lines;
}

}  // namespace gradgate::gateway::testing
