// The body of POST /v1/jobs/{id}/ranks (a gateway claims a rank by name): {"name": ..., "nodes":
// ...}, with the name's length and characters and the job size checked and no unknown members.
// Errors name the JSON pointer of the bad member.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/http/json_body.h"

namespace gradgate::control {

struct RankClaimBody {
  std::string name;    // 1..253 characters of [A-Za-z0-9._-] (a Kubernetes node name fits)
  uint32_t nodes = 1;  // the job's size, 1..65536
};

/// Fills `claim` from `body`; the first problem found otherwise (400 or 422).
std::optional<http::BodyError> read_rank_claim(std::string_view body, RankClaimBody& claim);

}  // namespace gradgate::control
