// The shipped Grafana dashboards and Prometheus alert rules against the real thing: two gateways
// and a controller, scraped by a real Prometheus that also loads the rules file, while workers
// all-reduce and a foreign peer and a malformed report provoke errors. Every panel query must
// parse and return data, every template variable's metric must exist, every rule must parse and
// evaluate without error. A metric renamed in code fails this test. And every documented metric is
// on a dashboard or in an alert rule.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "common/http/client.h"
#include "controller_process.h"
#include "job.h"
#include "prometheus_server.h"
#include "transport_test_support.h"  // RawPeer

namespace gradgate::gateway::testing {
namespace {

using std::chrono::milliseconds;
namespace fs = std::filesystem;

const fs::path kDashboards = fs::path(GRADGATE_SOURCE_DIR) / "dashboards";
const fs::path kRules = kDashboards / "alerts" / "gradgate-alerts.yaml";

struct Query {
  std::string where;  // "dashboard file: panel title" or "rule NAME"
  std::string expr;   // as written
};

// Grafana's variables as the dashboards would have them with "All" selected.
std::string with_variables(std::string expr) {
  static const std::vector<std::pair<std::regex, std::string>> kVariables = {
      {std::regex(R"(\$__rate_interval|\$\{__rate_interval\})"), "15s"},
      {std::regex(R"(\$__interval|\$\{__interval\})"), "5s"},
      {std::regex(R"(\$__range|\$\{__range\})"), "1m"},
      {std::regex(R"(\$\{?(job|node|instance)(:[a-z]+)?\}?)"), ".+"},
  };
  for (const auto& [pattern, value] : kVariables) expr = std::regex_replace(expr, pattern, value);
  return expr;
}

// Every panel target's expression, rows' nested panels included.
void collect_panels(const nlohmann::json& panels, const std::string& file,
                    std::vector<Query>& queries) {
  for (const auto& panel : panels) {
    if (panel.contains("panels")) collect_panels(panel["panels"], file, queries);
    for (const auto& target : panel.value("targets", nlohmann::json::array())) {
      if (target.contains("expr")) {
        queries.push_back({file + ": " + panel.value("title", "?"), target["expr"]});
      }
    }
  }
}

std::vector<fs::path> dashboard_files() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kDashboards)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// label_values(METRIC_SELECTOR, LABEL) of the template variables, as a query that must have data.
std::vector<Query> variable_queries(const nlohmann::json& dashboard, const std::string& file) {
  std::vector<Query> queries;
  static const std::regex kLabelValues(R"(label_values\((.+),\s*([a-zA-Z_]+)\)\s*$)");
  for (const auto& variable : dashboard["templating"]["list"]) {
    if (variable.value("type", "") != "query") continue;
    const auto& query = variable["query"];
    const std::string text =
        query.is_object() ? query.value("query", "") : query.get<std::string>();
    std::smatch match;
    if (std::regex_search(text, match, kLabelValues)) {
      queries.push_back({file + ": variable " + variable.value("name", "?"),
                         "count by (" + match[2].str() + ") (" + match[1].str() + ")"});
    }
  }
  return queries;
}

std::vector<Query> rule_queries() {
  std::vector<Query> queries;
  const YAML::Node rules = YAML::LoadFile(kRules.string());
  for (const auto& group : rules["groups"]) {
    for (const auto& rule : group["rules"]) {
      const std::string name =
          rule["alert"] ? rule["alert"].as<std::string>() : rule["record"].as<std::string>();
      queries.push_back({"rule " + name, rule["expr"].as<std::string>()});
    }
  }
  return queries;
}

// The queries of every panel and template variable of the dashboards in `files`.
std::vector<Query> panel_queries(const std::vector<fs::path>& files) {
  std::vector<Query> queries;
  for (const auto& file : files) {
    const auto dashboard = read_json(file);
    collect_panels(dashboard["panels"], file.filename().string(), queries);
    for (auto& query : variable_queries(dashboard, file.filename().string())) {
      queries.push_back(std::move(query));
    }
  }
  return queries;
}

// The result rows of an instant query, or the error that Prometheus gave.
struct Answer {
  bool parsed = false;
  std::size_t rows = 0;
  std::string error;
};

Answer ask(const PrometheusServer& prometheus, const std::string& expr) {
  const auto body = prometheus.query_answer(with_variables(expr));
  if (!body.ok()) return {false, 0, body.status().to_string()};
  if (body->value("status", "") != "success") return {false, 0, body->value("error", "?")};
  const auto& result = (*body)["data"]["result"];
  return {true, result.is_array() ? result.size() : 1, ""};
}

void run_workers(bench::LocalJob& job, uint64_t seed) {
  const std::vector<TensorArg> tensors = {{"fc.weight", 100000}, {"fc.bias", 100}};
  auto w0 = start_worker(job, 0, 0, tensors, 10, seed, job.dir() + "/w0");
  auto w1 = start_worker(job, 1, 0, tensors, 10, seed, job.dir() + "/w1");
  ASSERT_EQ(w0->wait_exit(milliseconds(60000)), 0) << w0->log();
  ASSERT_EQ(w1->wait_exit(milliseconds(60000)), 0) << w1->log();
}

// Every rule's expression parses, and Prometheus loaded the file and evaluates every rule without
// error.
void expect_rules_evaluate(const PrometheusServer& prometheus, const std::vector<Query>& rules) {
  for (const auto& rule : rules) {
    const Answer answer = ask(prometheus, rule.expr);
    EXPECT_TRUE(answer.parsed) << rule.where << ": " << rule.expr << "\n  " << answer.error;
  }
  const auto loaded = prometheus.api("/api/v1/rules");
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  std::size_t evaluated = 0;
  for (const auto& group : (*loaded)["data"]["groups"]) {
    for (const auto& rule : group["rules"]) {
      ++evaluated;
      EXPECT_EQ(rule.value("health", ""), "ok")
          << rule.value("name", "?") << ": " << rule.value("lastError", "");
    }
  }
  EXPECT_EQ(evaluated, rules.size()) << "Prometheus must load every rule of " << kRules;
}

// Panels whose series exist only on nodes with a GPU, which this test's machine need not have:
// their queries must parse, not return data.
const std::map<std::string, std::string> kGpuOnlyPanels = {
    {"gradgate-compression.json: Placement probe: elements/s by codec and device",
     "a placement probe runs only for a tensor in GPU memory"}};

// Every metric that docs/metrics.md documents is on some dashboard panel or in some alert rule.
TEST(Dashboards, EveryDocumentedMetricIsShownOrAlertedOn) {
  std::vector<Query> queries = rule_queries();
  for (auto& query : panel_queries(dashboard_files())) queries.push_back(std::move(query));
  std::ifstream in(fs::path(GRADGATE_SOURCE_DIR) / "docs" / "metrics.md");
  const std::string document((std::istreambuf_iterator<char>(in)), {});
  static const std::regex kDocumented(R"(\n\| `(gradgate_[a-z0-9_]+)`)");
  std::size_t documented = 0;
  for (std::sregex_iterator it(document.begin(), document.end(), kDocumented), end; it != end;
       ++it) {
    const std::string metric = (*it)[1].str();
    ++documented;
    const std::regex used("\\b" + metric + "(_bucket|_sum|_count)?\\b");
    const bool shown = std::any_of(queries.begin(), queries.end(), [&](const Query& query) {
      return std::regex_search(query.expr, used);
    });
    EXPECT_TRUE(shown) << metric << " is on no panel and in no rule";
  }
  EXPECT_GE(documented, 40u) << "docs/metrics.md: the table rows were not found";
}

TEST(Dashboards, EveryPanelQueryReturnsDataAndEveryRuleEvaluates) {
  ASSERT_TRUE(fs::exists(PrometheusServer::kBinary))
      << "Debian's prometheus package is needed (./gradgate.sh installs it)";
  const auto files = dashboard_files();
  ASSERT_GE(files.size(), 5u) << "overview, links, compression, control plane, errors";
  std::vector<Query> panels = panel_queries(files);
  const std::vector<Query> rules = rule_queries();
  ASSERT_FALSE(rules.empty());

  ControllerProcess controller;
  controller.start("topk:density=0.01", "bandwidth");
  auto options = job_options(2, 1, "topk:density=0.01");
  options.report_interval_ms = 200;
  options.control_url = controller.url();
  bench::LocalJob job(options);
  PrometheusServer prometheus(job.dir(), {job.admin_port(0), job.admin_port(1), controller.port()},
                              kRules.string());
  ASSERT_TRUE(prometheus.wait_for("count(up{job=\"gradgate\"} == 1)", [](double v) {
    return v == 3;
  })) << prometheus.log();

  // Errors for the error panels: a peer of another job, a report that is not JSON, an unknown
  // path on a gateway's admin API.
  RawPeer foreign(job.port(0));
  ASSERT_TRUE(foreign.connected() && foreign.send_hello(999, 1));
  foreign.read_until_closed();
  http::ClientOptions to_controller;
  to_controller.port = controller.port();
  const auto refused =
      http::send_request(to_controller, http::verb::post, "/v1/nodes", "not a report");
  ASSERT_TRUE(refused.ok() && refused->status == 400);
  http::ClientOptions to_gateway;
  to_gateway.port = job.admin_port(0);
  const auto unknown = http::send_request(to_gateway, http::verb::get, "/v1/nowhere");
  ASSERT_TRUE(unknown.ok() && unknown->status == 404);

  // GPU-only panels' queries must parse; they may have no data here.
  std::vector<Query> pending;
  std::size_t gpu_only = 0;
  for (auto& query : panels) {
    if (!kGpuOnlyPanels.contains(query.where)) {
      pending.push_back(std::move(query));
      continue;
    }
    ++gpu_only;
    const Answer answer = ask(prometheus, query.expr);
    EXPECT_TRUE(answer.parsed) << query.where << ": " << query.expr << "\n  " << answer.error;
  }
  EXPECT_EQ(gpu_only, kGpuOnlyPanels.size()) << "a GPU-only panel listed here is on no dashboard";

  // Traffic until every other panel has data (bounded: 90 s).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  for (uint64_t round = 1; !pending.empty() && std::chrono::steady_clock::now() < deadline;
       ++round) {
    run_workers(job, round);
    std::vector<Query> still;
    for (auto& query : pending) {
      const Answer answer = ask(prometheus, query.expr);
      ASSERT_TRUE(answer.parsed) << query.where << ": " << query.expr << "\n  " << answer.error;
      if (answer.rows == 0) still.push_back(std::move(query));
    }
    pending = std::move(still);
  }
  for (const auto& query : pending) {
    ADD_FAILURE() << query.where << ": no data for " << with_variables(query.expr);
  }

  expect_rules_evaluate(prometheus, rules);
}

}  // namespace
}  // namespace gradgate::gateway::testing
