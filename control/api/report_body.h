// The body of POST /v1/nodes (a gateway's report) read into a NodeReport, with every member
// checked: types, ranges, node and peer indices below `nodes`, no duplicate peers, tensors or
// codecs, and no unknown members. Errors name the JSON pointer of the bad member.
#pragma once

#include <optional>
#include <string_view>

#include "common/http/json_body.h"
#include "control/registry/node_report.h"

namespace gradgate::control {

/// Fills `report` from `body`; the first problem found otherwise (400 or 422).
std::optional<http::BodyError> read_report(std::string_view body, NodeReport& report);

}  // namespace gradgate::control
