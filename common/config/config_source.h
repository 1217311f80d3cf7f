// Where a configuration comes from, shared by the gateway's and the controller's loaders: the
// file's text, the process environment, the `--set section.key=value` texts, and the position of
// a YAML node for error messages. Each loader keeps its own keys and rules.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/config/config_errors.h"
#include "gradgate/base/status.h"

namespace gradgate::config {

/// The text of the config file at `path`: kNotFound when it does not exist, kInvalidArgument
/// when it is not a regular file or cannot be read (naming it as `what`, the path and the reason).
Result<std::string> read_config_file(const std::string& path,
                                     std::string_view what = "config file");

/// This process's environment variables by name.
std::map<std::string, std::string> process_environment();

/// " (line L, column C)" for a node's mark; "" when the mark is unknown.
std::string yaml_location(const YAML::Mark& mark);

/// "invalid YAML: <why> (line L, column C)" for an error of the YAML parser; nesting beyond the
/// parser's depth limit says so (yaml-cpp's own message for it is "bad file").
std::string invalid_yaml(const YAML::Exception& error);

/// Splits each `--set` text into its key path and value and calls `apply(origin, path, value)`
/// (origin: `--set "TEXT"`, for error messages); a text without '=' is an error of its own.
void for_each_set_override(
    const std::vector<std::string>& overrides, ConfigErrors& errors,
    const std::function<void(const std::string& origin, const std::string& path,
                             std::string_view value)>& apply);

}  // namespace gradgate::config
