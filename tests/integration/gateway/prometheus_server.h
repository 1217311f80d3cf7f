// A real Prometheus server (Debian's /usr/bin/prometheus) for tests: scrapes the given loopback
// targets every second under the scrape job "gradgate", optionally evaluates a rules file, and
// answers PromQL through its HTTP API.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "child_process.h"
#include "gradgate/base/status.h"

namespace gradgate::gateway::testing {

class PrometheusServer {
 public:
  static constexpr char kBinary[] = "/usr/bin/prometheus";

  /// Starts it with its configuration and data in `dir`; `rules_file` ("" for none) is loaded.
  PrometheusServer(const std::string& dir, const std::vector<uint16_t>& targets,
                   const std::string& rules_file = "");
  ~PrometheusServer();  // SIGTERM, bounded wait
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  /// GET `path` (with its query) of the HTTP API: the parsed JSON body, whatever the status
  /// (Prometheus explains errors in the body); kUnavailable when it did not answer in JSON.
  Result<nlohmann::json> api(const std::string& path) const;
  /// The instant-query answer for `promql` (`status`, `data` or `error`).
  Result<nlohmann::json> query_answer(const std::string& promql) const;
  /// The value of a query that yields one sample, or nothing (yet).
  std::optional<double> query(const std::string& promql) const;
  /// Waits (bounded, 30 s) until `promql` has a value that `accept` takes; returns it.
  std::optional<double> wait_for(const std::string& promql,
                                 const std::function<bool(double)>& accept) const;

  std::string log() const { return process_->log(); }

 private:
  uint16_t port_ = 0;
  std::unique_ptr<bench::ChildProcess> process_;
};

/// `text` percent-encoded for a URL query value.
std::string url_encode(const std::string& text);

}  // namespace gradgate::gateway::testing
