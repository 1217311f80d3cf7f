// The policy settings set through the API (PUT /v1/policy, PUT /v1/budget), kept in a file
// (policy.settings_file) so that a controller restarted or moved to another pod decides with
// them, not with its config's policy section. The file holds the JSON of GET /v1/policy.
#pragma once

#include <optional>
#include <string>

#include "control/config/control_config.h"
#include "control/policy/policy.h"
#include "gradgate/base/status.h"

namespace gradgate::control {

/// The settings in `path`; nullopt when the file does not exist. kInvalidArgument naming the file
/// and the member when it does not hold settings (absent members take `defaults`, as in PUT);
/// kUnavailable when it cannot be read.
Result<std::optional<PolicySettings>> load_settings_file(const std::string& path,
                                                         const PolicySettings& defaults);

/// The settings of `config`'s policy.settings_file when it names a file that exists, checked by
/// the policy engine as at start (errors name the file); nullopt otherwise: the config's policy
/// section applies.
Result<std::optional<PolicySettings>> stored_settings(const ControlConfig& config);

/// Replaces `path` with `settings`: written to a temporary file beside it, flushed to the disk and
/// renamed over it, so that a crash leaves the old file or the new one. kUnavailable naming the
/// step that failed.
Status save_settings_file(const std::string& path, const PolicySettings& settings);

}  // namespace gradgate::control
