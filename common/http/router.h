// The route table of an HttpServer: which handler serves a method and a path. Patterns are exact
// paths whose segments may be `{name}` parameters ("/v1/jobs/{id}"); a pattern without
// parameters wins over one with parameters, then the pattern added first wins.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/http/message.h"
#include "common/http/responder.h"
#include "gradgate/base/status.h"

namespace gradgate::http {

/// What the server checks before a route's handler runs.
struct RouteOptions {
  /// The request must carry the server's bearer token (when the server has one): 401 or 403.
  bool requires_token = false;
  /// The route takes a JSON body: a non-empty body must say so in Content-Type (415 otherwise).
  bool json_body = false;
  /// The query parameters the route takes (empty: none): any other is a 400 naming it, so that a
  /// misspelt one is not ignored. Unset: the query is not checked (health and metrics routes).
  std::optional<std::vector<std::string>> query{};
};

struct Route {
  verb method;
  Handler handler;             // an ordinary route answers with its return value ...
  AsyncHandler async_handler;  // ... a deferred one (handler empty) through a Responder
  RouteOptions options;
};

/// Not thread-safe to change; matching is const and safe to share once the table is complete.
class Router {
 public:
  /// Adds a route. Errors (kInvalidArgument): a malformed pattern, or a method already routed
  /// for the same pattern.
  Status add(verb method, std::string_view pattern, Handler handler, RouteOptions options);
  /// Adds a deferred route (see responder.h); the same errors.
  Status add_async(verb method, std::string_view pattern, AsyncHandler handler,
                   RouteOptions options);

  struct Match {
    const Route* route = nullptr;  // null when the path is unknown or lacks this method
    Parameters path_parameters;    // values of the pattern's {name} segments
    std::vector<verb> allowed;     // the methods the path has (for 405); empty: unknown path
    std::string_view pattern;      // the pattern the path matched, as added; empty: none
  };
  /// The route for `method` on a path of decoded `segments`. HEAD takes the GET route where the
  /// path has no HEAD route of its own (RFC 9110: HEAD is GET without the content; the server
  /// drops the body), and is then among the allowed methods.
  Match match(verb method, const std::vector<std::string>& segments) const;

 private:
  struct Segment {
    std::string text;  // the literal, or the parameter's name
    bool is_parameter = false;
  };
  struct Pattern {
    std::string text;
    std::vector<Segment> segments;
    bool has_parameters = false;
    std::vector<Route> routes;
  };

  Status add_route(std::string_view pattern, Route route);
  static bool matches(const Pattern& pattern, const std::vector<std::string>& segments);

  std::vector<Pattern> patterns_;
};

}  // namespace gradgate::http
