#include "control/api/routes.h"

#include <boost/asio/post.hpp>
#include <charconv>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "common/http/problem.h"
#include "gradgate/base/job_limits.h"
#include "control/api/rank_body.h"
#include "control/api/report_body.h"
#include "control/api/settings_json.h"
#include "control/api/views.h"

namespace gradgate::control {
namespace {

using http::Request;
using http::Responder;
using http::Response;
using http::status;
using http::verb;

// An unsigned query parameter: nullopt when absent, a 400 (not a number) or 422 (above `max`)
// problem naming it when bad.
struct QueryNumber {
  std::optional<uint64_t> value;
  std::optional<Response> problem;
};

QueryNumber query_number(const Request& request, std::string_view name,
                         uint64_t max = std::numeric_limits<uint64_t>::max()) {
  const auto found = request.query().find(name);
  if (found == request.query().end()) return {};
  const std::string& text = found->second;
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    return {.value = std::nullopt,
            .problem = http::problem(
                status::bad_request, {},
                std::string(name) + ": must be an unsigned integer, got \"" + text + "\"",
                std::string(name))};
  }
  if (value > max) {
    return {.value = std::nullopt,
            .problem = http::problem(status::unprocessable_entity, {},
                                     std::string(name) + ": must be <= " + std::to_string(max),
                                     std::string(name))};
  }
  return {.value = value, .problem = std::nullopt};
}

// `field`: the query or path parameter that named the job.
Response unknown_job(uint64_t job_id, std::string field = "job_id") {
  return http::problem(status::not_found, {}, "job " + std::to_string(job_id) + " is not known",
                       std::move(field));
}

// The job id of the path (/v1/jobs/{id}...): a 400 problem naming `id` when it is not an
// unsigned 64-bit integer.
struct PathJobId {
  uint64_t value = 0;
  std::optional<Response> problem;
};

PathJobId path_job_id(const Request& request) {
  const std::string_view text = request.path_parameter("id");
  PathJobId job_id;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), job_id.value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    job_id.problem = http::problem(
        status::bad_request, {},
        "id: the job id must be an unsigned integer, got \"" + std::string(text) + "\"", "id");
  }
  return job_id;
}

Response missing_job_id() {
  return http::problem(status::bad_request, {}, "job_id: the query parameter is required",
                       "job_id");
}

// The response to a PUT whose settings make_policy refused: 422 naming the body member.
Response refused_settings(const Status& refusal) {
  if (refusal.code() == ErrorCode::kUnavailable) {  // valid, but policy.settings_file failed
    return http::problem(status::service_unavailable, {}, refusal.message());
  }
  const std::string pointer = settings_pointer(refusal.message());
  return http::problem(status::unprocessable_entity, {}, pointer + ": " + refusal.message(),
                       pointer);
}

class Routes {
 public:
  Routes(Controller& controller, ControllerMetrics& metrics, RouteSettings settings,
         boost::asio::thread_pool& settings_writer)
      : controller_(controller),
        metrics_(metrics),
        settings_(std::move(settings)),
        settings_writer_(settings_writer) {}

  Response post_node(const Request& request) {
    NodeReport report;
    if (auto error = read_report(request.body(), report)) {
      metrics_.count_report_error(error->code == status::bad_request ? "malformed" : "invalid");
      return error->response();
    }
    const uint64_t job_id = report.job_id;
    const uint32_t node = report.node;
    const Result<uint64_t> latest = controller_.report(std::move(report));
    if (!latest.ok()) {
      metrics_.count_report_error("too_many_jobs");
      return http::problem(status::service_unavailable, {}, latest.status().message());
    }
    return http::json_response({{"job_id", job_id},
                                {"node", node},
                                {"policy_version", *latest},
                                {"report_interval_ms", settings_.report_interval.count()}});
  }

  void get_policy(const Request& request, const Responder& respond) {
    const QueryNumber job_id = query_number(request, "job_id");
    if (job_id.problem) return respond(*job_id.problem);
    if (!job_id.value) {
      return respond(http::json_response(controller_.read(
          [](const ControllerView& view) { return settings_json(view.settings); })));
    }
    const QueryNumber known = query_number(request, "known_version");
    if (known.problem) return respond(*known.problem);
    const QueryNumber wait = query_number(request, "wait_ms", kMaxPolicyWaitMs);
    if (wait.problem) return respond(*wait.problem);
    const QueryNumber node_query = query_number(request, "node", kMaxJobNodes - 1);
    if (node_query.problem) return respond(*node_query.problem);
    const uint64_t job = *job_id.value;
    const std::optional<uint32_t> node = node_query.value;
    if (node) {
      if (auto beyond = node_beyond_job(job, *node)) return respond(*beyond);
    }
    Controller& controller = controller_;
    const Status waiting = controller_.when_version_above(
        job, known.value.value_or(0),
        Clock::now() + std::chrono::milliseconds(wait.value.value_or(0)),
        [&controller, job, node, respond] {
          // Made under the lock: the version is not copied, and a node's view is small.
          respond(http::json_response(controller.read([job, node](const ControllerView& view) {
            return policy_json(job, view.version_of(job), node);
          })));
        });
    if (!waiting.ok()) respond(unknown_job(job));
  }

  // A 422 naming `node` when it is not a node of the job (nullopt also for an unknown job).
  std::optional<Response> node_beyond_job(uint64_t job_id, uint32_t node) {
    const uint32_t size = controller_.read([job_id](const ControllerView& view) {
      const JobState* job = view.registry.find(job_id);
      return job == nullptr ? kMaxJobNodes : job->nodes;
    });
    if (node < size) return std::nullopt;
    return http::problem(status::unprocessable_entity, {},
                         "node: must be below the size of job " + std::to_string(job_id) + " (" +
                             std::to_string(size) + ")",
                         "node");
  }

  void put_policy(const Request& request, const Responder& respond) {
    PolicySettings settings;
    if (auto error = read_settings(request.body(), settings_.defaults, settings)) {
      return respond(error->response());
    }
    change_settings(respond, [&controller = controller_, settings = std::move(settings)] {
      const Status applied = controller.set_settings(settings);
      if (!applied.ok()) return refused_settings(applied);
      return http::json_response(settings_json(settings));
    });
  }

  Response get_budget(const Request& request) {
    const QueryNumber job_id = query_number(request, "job_id");
    if (job_id.problem) return *job_id.problem;
    if (!job_id.value) return missing_job_id();
    return controller_.read([&](const ControllerView& view) {
      if (view.registry.find(*job_id.value) == nullptr) return unknown_job(*job_id.value);
      return http::json_response(budget_json(view, *job_id.value));
    });
  }

  void put_budget(const Request& request, const Responder& respond) {
    std::optional<double> budget;
    if (auto error = read_budget(request.body(), budget)) return respond(error->response());
    change_settings(respond, [&controller = controller_, budget] {
      const Status applied = controller.set_traffic_budget(budget);
      if (!applied.ok()) return refused_settings(applied);
      return http::json_response(
          {{"traffic_budget", budget ? nlohmann::json(*budget) : nlohmann::json(nullptr)}});
    });
  }

  Response get_jobs(const Request&) { return http::json_response(controller_.read(jobs_json)); }

  Response get_job(const Request& request) {
    const PathJobId job_id = path_job_id(request);
    if (job_id.problem) return *job_id.problem;
    auto job = controller_.read(
        [&job_id](const ControllerView& view) { return job_json(view, job_id.value); });
    if (!job) return unknown_job(job_id.value, "id");
    return http::json_response(*job);
  }

  Response post_ranks(const Request& request) {
    const PathJobId job_id = path_job_id(request);
    if (job_id.problem) return *job_id.problem;
    RankClaimBody claim;
    if (auto error = read_rank_claim(request.body(), claim)) return error->response();
    const Result<uint32_t> rank = controller_.claim_rank(job_id.value, claim.name, claim.nodes);
    if (!rank.ok()) {
      const ErrorCode code = rank.status().code();
      const status answer = code == ErrorCode::kResourceExhausted ? status::conflict
                            : code == ErrorCode::kUnavailable     ? status::service_unavailable
                                                                  : status::unprocessable_entity;
      return http::problem(answer, {}, rank.status().message());
    }
    return http::json_response(
        {{"job_id", job_id.value}, {"name", claim.name}, {"node", *rank}, {"nodes", claim.nodes}});
  }

  // GET /v1/nodes and /v1/links: every job's, or one job's with ?job_id=.
  Response get_filtered(const Request& request,
                        nlohmann::json (*view_json)(const ControllerView&,
                                                    std::optional<uint64_t>)) {
    const QueryNumber job_id = query_number(request, "job_id");
    if (job_id.problem) return *job_id.problem;
    return controller_.read([&](const ControllerView& view) {
      if (job_id.value && view.registry.find(*job_id.value) == nullptr) {
        return unknown_job(*job_id.value);
      }
      return http::json_response(view_json(view, job_id.value));
    });
  }

  Response get_nodes(const Request& request) { return get_filtered(request, nodes_json); }
  Response get_links(const Request& request) { return get_filtered(request, links_json); }

 private:
  // Runs `change` on the settings writer and answers with its response (500 if it throws).
  void change_settings(const Responder& respond, std::function<Response()> change) {
    boost::asio::post(settings_writer_, [respond, change = std::move(change)] {
      try {
        respond(change());
      } catch (const std::exception& error) {
        spdlog::error("changing the policy settings failed: {}", error.what());
        respond(http::handler_failed());
      }
    });
  }

  Controller& controller_;
  ControllerMetrics& metrics_;
  const RouteSettings settings_;
  boost::asio::thread_pool& settings_writer_;
};

}  // namespace

void add_control_routes(http::HttpServer& server, Controller& controller,
                        ControllerMetrics& metrics, RouteSettings settings,
                        boost::asio::thread_pool& settings_writer) {
  // Shared by the handlers, which the server keeps until it is destroyed.
  auto routes = std::make_shared<Routes>(controller, metrics, std::move(settings), settings_writer);
  // Every route names the query parameters it takes: a misspelt one is a 400, not ignored.
  const http::RouteOptions mutating{.requires_token = true, .json_body = true, .query = {{}}};
  const http::RouteOptions plain{.query = {{}}};
  const http::RouteOptions by_job{.query = {{"job_id"}}};
  auto add = [&](verb method, const char* pattern, Response (Routes::*handler)(const Request&),
                 const http::RouteOptions& options) {
    server.add_route(
        method, pattern,
        [routes, handler](const Request& request) { return (routes.get()->*handler)(request); },
        options);
  };
  add(verb::post, "/v1/nodes", &Routes::post_node, mutating);
  add(verb::get, "/v1/budget", &Routes::get_budget, by_job);
  add(verb::get, "/v1/jobs", &Routes::get_jobs, plain);
  add(verb::get, "/v1/jobs/{id}", &Routes::get_job, plain);
  add(verb::post, "/v1/jobs/{id}/ranks", &Routes::post_ranks, mutating);
  add(verb::get, "/v1/nodes", &Routes::get_nodes, by_job);
  add(verb::get, "/v1/links", &Routes::get_links, by_job);
  auto add_deferred = [&](verb method, const char* pattern,
                          void (Routes::*handler)(const Request&, const Responder&),
                          const http::RouteOptions& options) {
    server.add_async_route(
        method, pattern,
        [routes, handler](const Request& request, Responder respond) {
          (routes.get()->*handler)(request, respond);
        },
        options);
  };
  add_deferred(verb::get, "/v1/policy", &Routes::get_policy,
               {.query = {{"job_id", "known_version", "wait_ms", "node"}}});
  add_deferred(verb::put, "/v1/policy", &Routes::put_policy, mutating);
  add_deferred(verb::put, "/v1/budget", &Routes::put_budget, mutating);
}

}  // namespace gradgate::control
