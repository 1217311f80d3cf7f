#include "common/http/router.h"

#include <algorithm>

#include "common/http/target.h"

namespace gradgate::http {
namespace {

Status bad_pattern(std::string_view pattern, std::string_view why) {
  return Status(ErrorCode::kInvalidArgument,
                "route pattern '" + std::string(pattern) + "': " + std::string(why));
}

}  // namespace

Status Router::add(verb method, std::string_view pattern, Handler handler, RouteOptions options) {
  return add_route(pattern, Route{method, std::move(handler), {}, options});
}

Status Router::add_async(verb method, std::string_view pattern, AsyncHandler handler,
                         RouteOptions options) {
  return add_route(pattern, Route{method, {}, std::move(handler), options});
}

Status Router::add_route(std::string_view pattern, Route route) {
  if (pattern.empty() || pattern.front() != '/') return bad_pattern(pattern, "must start with '/'");
  Pattern parsed;
  for (std::string_view text : split_path(pattern)) {
    Segment segment{.text = std::string(text)};
    if (text.size() > 2 && text.front() == '{' && text.back() == '}') {
      segment = Segment{.text = std::string(text.substr(1, text.size() - 2)), .is_parameter = true};
      parsed.has_parameters = true;
    }
    if (segment.text.empty()) return bad_pattern(pattern, "has an empty segment");
    if (segment.text.find_first_of("{}%?") != std::string::npos) {
      return bad_pattern(pattern, "segments are literals or whole {name} parameters");
    }
    parsed.segments.push_back(std::move(segment));
  }
  for (std::size_t i = 0; i < parsed.segments.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (parsed.segments[i].is_parameter && parsed.segments[j].is_parameter &&
          parsed.segments[i].text == parsed.segments[j].text) {
        return bad_pattern(pattern, "names a parameter twice");
      }
    }
  }

  // Two patterns that match the same paths must be one, with the same parameter names.
  auto same_paths = [](const Segment& a, const Segment& b) {
    return a.is_parameter == b.is_parameter && (a.is_parameter || a.text == b.text);
  };
  auto existing = std::find_if(patterns_.begin(), patterns_.end(), [&](const Pattern& known) {
    return std::equal(known.segments.begin(), known.segments.end(), parsed.segments.begin(),
                      parsed.segments.end(), same_paths);
  });
  if (existing == patterns_.end()) {
    parsed.text = std::string(pattern);
    patterns_.push_back(std::move(parsed));
    existing = std::prev(patterns_.end());
  } else if (!std::equal(existing->segments.begin(), existing->segments.end(),
                         parsed.segments.begin(),
                         [](const Segment& a, const Segment& b) { return a.text == b.text; })) {
    return bad_pattern(pattern, "matches the paths of a pattern with other parameter names");
  }
  for (const Route& known : existing->routes) {
    if (known.method == route.method) return bad_pattern(pattern, "has this method already");
  }
  existing->routes.push_back(std::move(route));
  return Status::ok_status();
}

bool Router::matches(const Pattern& pattern, const std::vector<std::string>& segments) {
  if (pattern.segments.size() != segments.size()) return false;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    if (!pattern.segments[i].is_parameter && pattern.segments[i].text != segments[i]) return false;
  }
  return true;
}

Router::Match Router::match(verb method, const std::vector<std::string>& segments) const {
  const Pattern* best = nullptr;
  for (const Pattern& pattern : patterns_) {
    if (!matches(pattern, segments)) continue;
    if (best == nullptr || (best->has_parameters && !pattern.has_parameters)) best = &pattern;
  }
  Match found;
  if (best == nullptr) return found;
  found.pattern = best->text;
  const Route* get = nullptr;
  bool has_head = false;
  for (const Route& route : best->routes) {
    found.allowed.push_back(route.method);
    if (route.method == method) found.route = &route;
    if (route.method == verb::get) get = &route;
    has_head = has_head || route.method == verb::head;
  }
  if (get != nullptr && !has_head) {
    found.allowed.push_back(verb::head);
    if (method == verb::head) found.route = get;
  }
  for (std::size_t i = 0; i < segments.size(); ++i) {
    if (best->segments[i].is_parameter) {
      found.path_parameters.insert_or_assign(best->segments[i].text, segments[i]);
    }
  }
  return found;
}

}  // namespace gradgate::http
