// From a parsed HTTP request to the response: routing (404, 405 with Allow), the bearer token
// (401, 403), the JSON content type (415), and the handler itself (500 when it throws). The one
// place where requests are routed; the connection code only moves bytes.
// A deferred route gets `respond` and answers through it; dispatch() then returns nullopt.
#pragma once

#include <optional>

#include "common/http/message.h"
#include "common/http/responder.h"
#include "common/http/router.h"
#include "common/http/token.h"

namespace gradgate::http {

std::optional<Response> dispatch(const Router& router, const TokenCheck& token,
                                 const Request::Message& message, const Responder& respond);

}  // namespace gradgate::http
