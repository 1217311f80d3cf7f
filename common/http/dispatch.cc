#include "common/http/dispatch.h"

#include <spdlog/spdlog.h>
#include <algorithm>
#include <boost/beast/core/string.hpp>
#include <exception>
#include <optional>

#include "common/http/problem.h"
#include "common/http/target.h"

namespace gradgate::http {
namespace {

namespace beast_http = boost::beast::http;

// "application/json", "application/problem+json; charset=utf-8", ... but not "text/plain".
bool is_json_media_type(std::string_view content_type) {
  std::string_view media_type = content_type.substr(0, content_type.find(';'));
  while (!media_type.empty() && (media_type.back() == ' ' || media_type.back() == '\t')) {
    media_type.remove_suffix(1);
  }
  constexpr std::string_view kSuffix = "+json";
  return boost::beast::iequals(media_type, kJsonContentType) ||
         (media_type.size() > kSuffix.size() &&
          boost::beast::iequals(media_type.substr(media_type.size() - kSuffix.size()), kSuffix));
}

Response method_not_allowed(verb method, std::string_view path, const std::vector<verb>& allowed) {
  std::string allow;
  for (verb each : allowed) {
    if (!allow.empty()) allow += ", ";
    allow += beast_http::to_string(each);
  }
  Response response = problem(status::method_not_allowed, {},
                              std::string(beast_http::to_string(method)) + " is not allowed on " +
                                  std::string(path) + "; allowed: " + allow);
  response.headers.emplace_back("Allow", std::move(allow));
  return response;
}

Response unauthorized(std::string detail) {
  Response response = problem(status::unauthorized, {}, std::move(detail), "Authorization");
  response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"gradgate\"");
  return response;
}

// The token check's verdict as a response; nullopt when the request may go on.
std::optional<Response> refuse_by_token(TokenCheck::Verdict verdict) {
  switch (verdict) {
    case TokenCheck::Verdict::kAllowed:
      return std::nullopt;
    case TokenCheck::Verdict::kMissing:
      return unauthorized("this call needs an 'Authorization: Bearer <token>' header");
    case TokenCheck::Verdict::kNotBearer:
      return unauthorized("the Authorization header must be 'Bearer <token>'");
    case TokenCheck::Verdict::kWrongToken:
      return problem(status::forbidden, {}, "the bearer token is not valid for this server",
                     "Authorization");
  }
  return problem(status::internal_server_error, {}, "unknown token verdict");
}

// A 400 naming the first query parameter the route does not take; nullopt when all are taken.
std::optional<Response> refuse_unknown_query(const RouteOptions& options, const Parameters& query) {
  if (!options.query) return std::nullopt;
  const std::vector<std::string>& taken = *options.query;
  for (const auto& [name, value] : query) {
    if (std::find(taken.begin(), taken.end(), name) != taken.end()) continue;
    std::string accepted;
    for (const std::string& each : taken) accepted += (accepted.empty() ? "" : ", ") + each;
    return problem(status::bad_request, {},
                   name + ": unknown query parameter; " +
                       (taken.empty() ? "this path takes none" : "this path takes " + accepted),
                   name);
  }
  return std::nullopt;
}

void log_handler_failure(const Request& request, const char* why) {
  spdlog::error("HTTP {} {}: the handler failed: {}", beast_http::to_string(request.method()),
                request.path(), why);
}

// Runs the route's handler; an exception becomes a 500 (through `respond` for a deferred route,
// where it is ignored if the handler answered already).
std::optional<Response> call_handler(const Route& route, const Request& request,
                                     const Responder& respond) {
  try {
    if (!route.handler) {
      route.async_handler(request, respond);
      return std::nullopt;
    }
    return route.handler(request);
  } catch (const std::exception& error) {
    log_handler_failure(request, error.what());
  } catch (...) {
    log_handler_failure(request, "a non-standard exception");
  }
  if (route.handler) return handler_failed();
  respond(handler_failed());
  return std::nullopt;
}

}  // namespace

Dispatched dispatch(const Router& router, const TokenCheck& token, const Request::Message& message,
                    const Responder& respond) {
  const Result<Target> target = parse_target(message.target());
  if (!target.ok()) return {{}, problem(status::bad_request, {}, target.status().message())};
  const Router::Match match = router.match(message.method(), target->segments);
  if (match.route == nullptr) {
    if (match.allowed.empty()) {
      return {{}, problem(status::not_found, {}, "no resource at " + std::string(target->path))};
    }
    return {match.pattern, method_not_allowed(message.method(), target->path, match.allowed)};
  }
  const RouteOptions& options = match.route->options;
  if (options.requires_token) {
    const auto authorization = message.find(beast_http::field::authorization);
    auto refusal = refuse_by_token(
        token.check(authorization == message.end() ? std::string_view{} : authorization->value()));
    if (refusal) return {match.pattern, std::move(*refusal)};
  }
  if (auto refusal = refuse_unknown_query(options, target->query)) {
    return {match.pattern, std::move(*refusal)};
  }
  if (options.json_body && !message.body().empty()) {
    const auto content_type = message.find(beast_http::field::content_type);
    if (content_type == message.end() || !is_json_media_type(content_type->value())) {
      return {match.pattern,
              problem(status::unsupported_media_type, {},
                      "the body must be JSON, sent with 'Content-Type: application/json'",
                      "Content-Type")};
    }
  }
  return {
      match.pattern,
      call_handler(*match.route,
                   Request(message, target->path, target->query, match.path_parameters), respond)};
}

}  // namespace gradgate::http
