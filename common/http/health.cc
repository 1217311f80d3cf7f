#include "common/http/health.h"

#include <nlohmann/json.hpp>

#include "common/http/problem.h"

namespace gradgate::http {

void serve_health(HttpServer& server, ReadinessCheck ready) {
  auto ok = [](const Request&) { return json_response({{"status", "ok"}}); };
  server.add_route(verb::get, "/livez", ok);
  server.add_route(verb::get, "/readyz", [ready = std::move(ready), ok](const Request& request) {
    const Status readiness = ready ? ready() : Status::ok_status();
    if (readiness.ok()) return ok(request);
    return problem(status::service_unavailable, {}, "not ready: " + readiness.message());
  });
}

}  // namespace gradgate::http
