#include "control/api/rank_body.h"

#include <algorithm>

#include "gradgate/base/job_limits.h"

namespace gradgate::control {
namespace {

constexpr std::size_t kMaxNameLength = 253;

bool is_name_character(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

}  // namespace

std::optional<http::BodyError> read_rank_claim(std::string_view body, RankClaimBody& claim) {
  http::JsonBody json(body);
  const http::JsonObject root = json.root();
  const auto name = root.string("name");
  const auto nodes = root.integer("nodes", {.min = 1, .max = kMaxJobNodes});
  if (name) {
    if (name->empty() || name->size() > kMaxNameLength) {
      root.reject("name", "must have 1 to " + std::to_string(kMaxNameLength) + " characters");
    } else if (!std::all_of(name->begin(), name->end(), is_name_character)) {
      root.reject("name", "may only contain letters, digits, '.', '_' and '-'");
    }
    claim.name = *name;
  }
  if (nodes) claim.nodes = static_cast<uint32_t>(*nodes);
  return json.finish();
}

}  // namespace gradgate::control
