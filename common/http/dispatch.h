// From a parsed HTTP request to the response: routing (404, 405 with Allow), the bearer token
// (401, 403), the JSON content type (415), and the handler itself (500 when it throws). The one
// place where requests are routed; the connection code only moves bytes.
// A deferred route gets `respond` and answers through it; dispatch() then returns no response.
#pragma once

#include <optional>
#include <string_view>

#include "common/http/message.h"
#include "common/http/responder.h"
#include "common/http/router.h"
#include "common/http/token.h"

namespace gradgate::http {

struct Dispatched {
  std::string_view route;            // the pattern of the matched route; empty when none
  std::optional<Response> response;  // nullopt: a deferred route answers through the Responder
};

Dispatched dispatch(const Router& router, const TokenCheck& token, const Request::Message& message,
                    const Responder& respond);

}  // namespace gradgate::http
