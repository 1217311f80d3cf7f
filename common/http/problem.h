// Error responses of our REST APIs as RFC 9457 problem details (application/problem+json), so
// that every client reads every error the same way:
//   {"type": "about:blank", "title": "Unprocessable Entity", "status": 422,
//    "detail": "/rules/0/density: must be in (0, 1]", "field": "/rules/0/density"}
// `field` (our extension member) is the JSON pointer or name of the bad input, when there is one.
#pragma once

#include <string>
#include <string_view>

#include "common/http/message.h"

namespace gradgate::http {

inline constexpr std::string_view kProblemContentType = "application/problem+json";

/// A problem response of type "about:blank". `title` summarises the kind of problem; empty means
/// the reason phrase of `code` ("Not Found"), which RFC 9457 recommends for about:blank.
/// `detail` says what went wrong with this request; `field` names the bad input and is left out
/// when empty.
Response problem(status code, std::string title, std::string detail, std::string field = {});

/// The 500 of a handler that failed (threw); the log says why. Also for the part of a deferred
/// route that runs on another thread.
Response handler_failed();

}  // namespace gradgate::http
