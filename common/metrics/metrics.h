// The Prometheus metrics of a gradgate component (gateway or controller): one registry per
// process, created with gradgate_build_info, and the GET /metrics route that serves it from our
// own HTTP server in the text exposition format. Only prometheus-cpp's core library is used: the
// pull Exposer would embed a second web server.
#pragma once

#include <prometheus/registry.h>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/http/http_server.h"

namespace gradgate::metrics {

/// The content type of the text exposition format served on /metrics.
inline constexpr std::string_view kTextFormatContentType =
    "text/plain; version=0.0.4; charset=utf-8";

/// A registry holding `gradgate_build_info{version="<project version>",component="<component>",
/// transports="tcp,dpdk"} 1` (transports: those the build has).
/// Register the component's metrics in it; prometheus::Registry is thread-safe.
std::shared_ptr<prometheus::Registry> make_registry(std::string_view component);

/// Adds GET /metrics to `server` (before start()), serving everything in `registry`.
void serve_metrics(http::HttpServer& server, std::shared_ptr<prometheus::Registry> registry);

/// An HttpServer's on_response (ServerOptions) that counts every response in the counter `name`
/// of `registry`, by route pattern (`unmatched`: unknown paths and requests refused before
/// routing, connections over the limit among them) and status code.
std::function<void(std::string_view route, http::status code)> count_responses(
    std::shared_ptr<prometheus::Registry> registry, const std::string& name);

}  // namespace gradgate::metrics
