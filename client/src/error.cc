#include "error.h"

#include <string_view>

#include "c_enum.h"

namespace gradgate::client_impl {
namespace {

thread_local std::string last_error;

}  // namespace

gg_status fail(gg_status status, std::string message) {
  last_error = std::move(message);
  return status;
}

std::string quoted(const char* name) {
  if (name == nullptr) return "null";
  constexpr size_t kShown = 64;
  const std::string_view view(name);
  const std::string shown(view.substr(0, kShown));
  return '"' + shown + (view.size() > kShown ? "...\"" : "\"");
}

}  // namespace gradgate::client_impl

extern "C" const char* gg_last_error(void) { return gradgate::client_impl::last_error.c_str(); }

extern "C" const char* gg_status_name(gg_status status) {
  switch (gradgate::client_impl::c_enum_value(status)) {
    case GG_OK:
      return "ok";
    case GG_INVALID_ARGUMENT:
      return "invalid_argument";
    case GG_CONNECT_FAILED:
      return "connect_failed";
    case GG_PROTOCOL_ERROR:
      return "protocol_error";
    case GG_TIMEOUT:
      return "timeout";
    case GG_PEER_FAILED:
      return "peer_failed";
    case GG_CLOSED:
      return "closed";
    case GG_RESOURCE_EXHAUSTED:
      return "resource_exhausted";
    case GG_REJECTED:
      return "rejected";
    case GG_INTERNAL:
      return "internal";
    case GG_NONFINITE_GRADIENT:
      return "nonfinite_gradient";
    case GG_RANK_IN_USE:
      return "rank_in_use";
  }
  return "unknown";
}
