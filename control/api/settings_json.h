// Policy settings as JSON (GET and PUT /v1/policy, GET /v1/budget): the same member names as the
// policy section of config/control.yaml ("policy" for the policy's name).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "common/http/json_body.h"
#include "control/policy/policy.h"

namespace gradgate::control {

/// The settings as JSON; traffic_budget is null when unset.
nlohmann::json settings_json(const PolicySettings& settings);

/// Reads a PUT /v1/policy body into `settings`. "policy" is required; an absent member takes its
/// value from `defaults`. Types, ranges and unknown members are checked here (400/422 naming the
/// JSON pointer); the codec specs and rules by make_policy afterwards.
std::optional<http::BodyError> read_settings(std::string_view body, const PolicySettings& defaults,
                                             PolicySettings& settings);

/// Reads a PUT /v1/budget body: {"traffic_budget": b} with 0 < b <= 1, or null to clear it.
std::optional<http::BodyError> read_budget(std::string_view body, std::optional<double>& budget);

/// The JSON pointer of the body member a make_policy error names ("rules[1].glob: ..." is
/// "/rules/1/glob"; "name: ..." is "/policy").
std::string settings_pointer(std::string_view make_policy_message);

}  // namespace gradgate::control
