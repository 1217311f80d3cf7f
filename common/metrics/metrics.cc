#include "common/metrics/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/text_serializer.h>
#include <string>

#include "gradgate/config.h"

namespace gradgate::metrics {

std::shared_ptr<prometheus::Registry> make_registry(std::string_view component) {
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildGauge()
      .Name("gradgate_build_info")
      .Help(
          "Always 1; the labels say which version of which gradgate component runs, and the "
          "transports its build has")
      .Register(*registry)
      .Add({{"version", GRADGATE_VERSION},
            {"component", std::string(component)},
            {"transports", GRADGATE_TRANSPORTS}})
      .Set(1);
  return registry;
}

void serve_metrics(http::HttpServer& server, std::shared_ptr<prometheus::Registry> registry) {
  server.add_route(
      http::verb::get, "/metrics", [registry = std::move(registry)](const http::Request&) {
        return http::Response{.content_type = std::string(kTextFormatContentType),
                              .body = prometheus::TextSerializer().Serialize(registry->Collect())};
      });
}

std::function<void(std::string_view route, http::status code)> count_responses(
    std::shared_ptr<prometheus::Registry> registry, const std::string& name) {
  auto& responses = prometheus::BuildCounter()
                        .Name(name)
                        .Help("Responses of the HTTP server, by route pattern and status")
                        .Register(*registry);
  return [registry = std::move(registry), &responses](std::string_view route, http::status code) {
    responses
        .Add({{"route", route.empty() ? "unmatched" : std::string(route)},
              {"code", std::to_string(static_cast<int>(code))}})
        .Increment();
  };
}

}  // namespace gradgate::metrics
