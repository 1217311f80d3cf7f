// The request target ("/v1/jobs/a%20b?limit=10") split into what routing needs: the raw path,
// its percent-decoded segments and the decoded query. Used by the dispatcher.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/http/message.h"
#include "gradgate/base/status.h"

namespace gradgate::http {

struct Target {
  std::string_view path;              // as sent, without the query
  std::vector<std::string> segments;  // decoded; "/" has none, "/a/" has "a" and ""
  Parameters query;  // decoded ('+' is a space); a repeated key keeps its last value
};

/// The segments of a path that starts with '/', not decoded: "/" has none, "/a/" has "a" and "".
std::vector<std::string_view> split_path(std::string_view path);

/// Splits an origin-form target (it must start with '/'). Errors (kInvalidArgument) name what is
/// malformed: another form of target, or a bad percent-encoding.
Result<Target> parse_target(std::string_view target);

}  // namespace gradgate::http
