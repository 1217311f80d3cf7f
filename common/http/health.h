// The probes every gradgate server answers, for Kubernetes and load balancers: GET /livez (the
// process serves HTTP: always 200) and GET /readyz (200 when the component can do its work,
// 503 problem+json saying why not).
#pragma once

#include <functional>

#include "common/http/http_server.h"
#include "gradgate/base/status.h"

namespace gradgate::http {

/// Tells whether the component is ready; its error's message becomes the 503's detail. Runs on
/// the server's I/O thread: it must be quick and thread-safe.
using ReadinessCheck = std::function<Status()>;

/// Adds GET /livez and GET /readyz to `server` (before start()). Both answer
/// {"status":"ok"} when healthy; an empty `ready` means always ready.
void serve_health(HttpServer& server, ReadinessCheck ready);

}  // namespace gradgate::http
