// Gateways and a real controller process: the gateways follow its policies, keep the last one
// when it is killed (fail-static) while their all-reduces go on, and when it comes back they
// register again and follow its new policies; they report as often as it asks, and count its
// refusals. A link to the controller that holds their requests past control.request_timeout_ms
// makes them fail-static, and they catch up once it flows again. Also gateways and a controller
// of an earlier version, which has no per-node view of the policy, and a controller stand-in that
// holds its answers to their reports.
#include <signal.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/http/client.h"
#include "common/http/http_server.h"
#include "common/http/problem.h"
#include "controller_process.h"
#include "gradgate/client.h"
#include "job.h"
#include "tcp_proxy.h"

namespace gradgate::gateway::testing {
namespace {

using std::chrono::milliseconds;

nlohmann::json status_of(const bench::LocalJob& job, uint32_t rank) {
  http::ClientOptions options;
  options.port = job.admin_port(rank);
  auto answer = http::send_request(options, http::verb::get, "/v1/status");
  if (!answer.ok() || answer->status != 200) return {};
  return nlohmann::json::parse(answer->body, nullptr, false);
}

// Polls gateway `rank`'s status (bounded: 30 s) until `done` holds for it.
bool status_until(const bench::LocalJob& job, uint32_t rank,
                  const std::function<bool(const nlohmann::json&)>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto status = status_of(job, rank);
    if (status.is_object() && done(status)) return true;
    std::this_thread::sleep_for(milliseconds(50));  // polling processes we do not control
  }
  return false;
}

std::string codec_of(const bench::LocalJob& job, uint32_t rank) {
  return get_body(job.admin_port(rank), "/metrics");
}

// The worker of each of a two-gateway job's gateways, all-reducing tensor "w" of 60000 elements
// step after step until stopped (at most 120 s).
std::array<std::unique_ptr<bench::ChildProcess>, 2> start_endless_workers(bench::LocalJob& job) {
  const std::vector<TensorArg> tensors = {{"w", 60000}};
  const std::vector<std::string> forever = {"--seconds", "120",          "--out",
                                            "",          "--timeout-ms", "20000"};
  return {start_worker(job, 0, 0, tensors, 0, 1, job.dir() + "/w0", forever),
          start_worker(job, 1, 0, tensors, 0, 1, job.dir() + "/w1", forever)};
}

// A job of `nodes` gateways (one worker each, codec none) that report to the controller at `url`
// every `report_interval_ms`.
bench::LocalJobOptions reporting_to(const std::string& url, uint32_t nodes,
                                    uint32_t report_interval_ms) {
  auto options = job_options(nodes, 1, "none");
  options.control_url = url;
  options.report_interval_ms = report_interval_ms;
  return options;
}

TEST(GatewaysAndController, FollowPoliciesKeepTheLastOneWhileItIsDownAndRejoinWhenItReturns) {
  ControllerProcess controller;
  controller.start("topk:density=0.01");
  bench::LocalJob job(reporting_to(controller.url(), 2, 200));
  auto [w0, w1] = start_endless_workers(job);

  // The controller's policy reaches both gateways and their steps run under it.
  for (uint32_t rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(status_until(job, rank, [](const nlohmann::json& s) {
      return s.at("policy_version").get<uint32_t>() >= 1;
    })) << controller.log();
  }
  const auto before = status_of(job, 0).at("allreduces").get<uint64_t>();

  // Controller killed: fail-static, and the all-reduces go on under the last policy.
  controller.stop(SIGKILL);
  ASSERT_TRUE(status_until(job, 0, [](const nlohmann::json& s) { return s.at("fail_static"); }));
  ASSERT_TRUE(status_until(job, 0, [&](const nlohmann::json& s) {
    return s.at("allreduces").get<uint64_t>() > before + 20;
  }));
  const auto version = status_of(job, 0).at("policy_version").get<uint32_t>();
  EXPECT_NE(codec_of(job, 0).find("gradgate_allreduces_total{codec=\"topk\"}"), std::string::npos);

  // It comes back with another policy: the gateways register again and follow it.
  controller.start("fp16");
  for (uint32_t rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(status_until(job, rank,
                             [&](const nlohmann::json& s) {
                               return !s.at("fail_static").get<bool>() &&
                                      s.at("policy_version").get<uint32_t>() > version;
                             }))
        << controller.log() << "\n--- gateway " << rank << "\n"
        << job.gateway(rank).log() << "\n--- worker 0\n"
        << w0->log();
  }
  const auto after = status_of(job, 0).at("allreduces").get<uint64_t>();
  ASSERT_TRUE(status_until(job, 0, [&](const nlohmann::json& s) {
    return s.at("allreduces").get<uint64_t>() > after + 5;
  }));
  EXPECT_NE(codec_of(job, 0).find("gradgate_allreduces_total{codec=\"fp16\"}"), std::string::npos);
  w0->signal(SIGTERM);
  w1->signal(SIGTERM);
}

// The controller's replies say how often it expects reports (every 200 ms here): gateways
// configured to report once a minute report that often instead, or it would take them for stale.
TEST(GatewaysAndController, GatewaysReportAsOftenAsTheControllerAsks) {
  ControllerProcess controller;
  controller.start("none");
  bench::LocalJob job(reporting_to(controller.url(), 2, 60000));
  double reports = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (reports < 10 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(50));  // polling a process we do not control
    reports = sample(get_body(controller.port(), "/metrics"), "gradgate_controller_reports_total");
  }
  EXPECT_GE(reports, 10) << controller.log();
  EXPECT_TRUE(wait_for_log(job.gateway(0), "expects a report every 200 ms; reporting every 200 ms",
                           milliseconds(5000)))
      << job.gateway(0).log();
}

// A controller that can be reached but refuses the gateways' reports (they send no token, it
// wants one): they are not fail-static, and they count and log the refusals.
TEST(GatewaysAndController, RefusedReportsAreCountedAndLoggedNotFailStatic) {
  ControllerProcess controller;
  controller.require_token("s3cret");
  controller.start("none");
  bench::LocalJob job(reporting_to(controller.url(), 2, 100));
  const std::string series = "gradgate_control_errors_total{kind=\"unauthorized\"}";
  std::string metrics;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (sample(metrics, series) < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(50));  // polling a process we do not control
    metrics = get_body(job.admin_port(0), "/metrics");
  }
  EXPECT_GE(sample(metrics, series), 3) << metrics;
  EXPECT_EQ(sample(metrics, "gradgate_fail_static"), 0) << metrics;
  EXPECT_EQ(sample(metrics, "gradgate_control_errors_total{kind=\"refused\"}"), 0) << metrics;
  EXPECT_TRUE(wait_for_log(job.gateway(0), "answered 401", milliseconds(5000)))
      << job.gateway(0).log();
  EXPECT_NE(job.gateway(0).log().find("control.token_file"), std::string::npos);
}

// Every one of the job's three gateways connects to the two others, and an all-reduce through
// them gives every node the same result.
void expect_three_gateways_meet_and_agree(bench::LocalJob& job) {
  for (uint32_t index = 0; index < 3; ++index) {
    EXPECT_TRUE(status_until(job, index, [](const nlohmann::json& s) {
      return s.at("peers_up").size() == 2;
    })) << job.gateway(index).log();
  }
  const std::vector<TensorArg> tensors = {{"w", 5000}};
  std::vector<std::unique_ptr<bench::ChildProcess>> workers;
  for (uint32_t index = 0; index < 3; ++index) {
    workers.push_back(
        start_worker(job, index, 0, tensors, 3, 4, job.dir() + "/m" + std::to_string(index)));
  }
  for (auto& worker : workers) {
    EXPECT_EQ(worker->wait_exit(milliseconds(60000)), 0) << worker->log();
  }
  EXPECT_EQ(read_floats(job.dir() + "/m0"), read_floats(job.dir() + "/m2"));
}

// A gateway whose policy request waits on the controller (control.poll_wait_ms: a minute) stops
// on SIGTERM at once: the request is cancelled, not waited out.
TEST(GatewaysAndController, SigtermEndsAGatewayWhosePolicyRequestWaitsOnTheController) {
  ControllerProcess controller;
  controller.start("none");
  auto options = reporting_to(controller.url(), 2, 200);
  options.settings = {"control.poll_wait_ms=60000"};
  bench::LocalJob job(options);
  auto workers = start_endless_workers(job);
  ASSERT_TRUE(status_until(job, 0, [](const nlohmann::json& s) {
    return s.at("policy_version").get<uint32_t>() >= 1;
  })) << controller.log();
  // Its next request asks for a newer version, which the controller holds back for a minute.
  const auto stopping = std::chrono::steady_clock::now();
  job.gateway(0).signal(SIGTERM);
  EXPECT_EQ(job.gateway(0).wait_exit(milliseconds(30000)), 0) << job.gateway(0).log();
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, std::chrono::seconds(10));
  for (auto& worker : workers) worker->signal(SIGTERM);
}

TEST(GatewaysAndController, GatewaysTakeTheirPeersFromTheController) {
  ControllerProcess controller;
  controller.start("none");
  auto options = reporting_to(controller.url(), 3, 100);
  options.membership_from_controller = true;  // no addresses in their configs
  bench::LocalJob job(options);
  expect_three_gateways_meet_and_agree(job);

  // Rank 0, which the others dial, restarts at another address (a pod recreated with a new IP;
  // here a new port, its listen port being 0): they find it there through the controller.
  const uint16_t before = job.port(0);
  ASSERT_EQ(job.stop_gateway(0), 0);
  job.start_gateway(0);
  ASSERT_NE(job.port(0), before);
  expect_three_gateways_meet_and_agree(job);
  EXPECT_NE(job.gateway(1).log().find("rank 0 moved"), std::string::npos) << job.gateway(1).log();
}

// A DaemonSet's gateways: identical configs with `job.node_rank: auto`, told apart by node name.
TEST(GatewaysAndController, IdenticalGatewaysTakeTheirRanksFromTheControllerAndKeepThem) {
  ControllerProcess controller;
  controller.start("none");
  auto options = reporting_to(controller.url(), 3, 100);
  options.membership_from_controller = true;
  options.ranks_from_controller = true;
  bench::LocalJob job(options);
  std::set<uint32_t> ranks;
  for (uint32_t index = 0; index < 3; ++index) ranks.insert(job.rank_of(index));
  EXPECT_EQ(ranks, (std::set<uint32_t>{0, 1, 2})) << "each gateway a rank of its own";
  expect_three_gateways_meet_and_agree(job);

  // A gateway restarted on the same node gets its rank back.
  const uint32_t before = job.rank_of(1);
  ASSERT_EQ(job.stop_gateway(1), 0);
  job.start_gateway(1);
  EXPECT_EQ(job.rank_of(1), before) << job.gateway(1).log();
}

// A worker that connects while its gateway waits for the rest of its job finds the socket, is
// told what the gateway waits for, and connects once the job is complete.
TEST(GatewaysAndController, WorkersWaitForAGatewayThatJoinsItsJob) {
  ControllerProcess controller;
  controller.start("none");
  auto options = reporting_to(controller.url(), 2, 100);
  options.membership_from_controller = true;
  options.started = 0;
  bench::LocalJob job(options);
  job.launch_gateway(0);
  gg_client* client = nullptr;
  EXPECT_EQ(gg_connect_wait(job.socket(0).c_str(), 0, 5000, &client), GG_TIMEOUT);
  const std::string waited = gg_last_error();
  EXPECT_NE(waited.find("the gateway is not serving yet: waiting for the 2 gateways of job"),
            std::string::npos)
      << waited;
  job.launch_gateway(1);
  ASSERT_EQ(gg_connect_wait(job.socket(0).c_str(), 0, 60000, &client), GG_OK) << gg_last_error();
  job.await_gateway(0);
  job.await_gateway(1);
  EXPECT_EQ(gg_close(client), GG_OK);
}

// The routes of a controller before GET /v1/policy took `node`: it refuses the parameter, as
// every route refuses those it does not take, and sends the whole policy, every node's codecs.
// It takes reports and hands out version 1, which gives each node a codec of its own.
class ControllerWithoutNodeView {
 public:
  ControllerWithoutNodeView()
      : server_({.on_response = [this](std::string_view route, http::status code) {
          std::lock_guard lock(mutex_);
          if (route == "/v1/policy") answers_.push_back(static_cast<int>(code));
        }}) {
    server_.add_route(http::verb::post, "/v1/nodes",
                      [](const http::Request& request) {
                        const auto report = nlohmann::json::parse(request.body());
                        return http::json_response({{"job_id", report.at("job_id")},
                                                    {"node", report.at("node")},
                                                    {"policy_version", 1},
                                                    {"report_interval_ms", 100}});
                      },
                      {.json_body = true, .query = {{}}});
    server_.add_route(http::verb::get, "/v1/policy",
                      [](const http::Request& request) {
                        // Known already: as if the job were not known (the gateway asks again a
                        // second later).
                        if (request.query().at("known_version") != "0") {
                          return http::problem(http::status::not_found, {}, "no newer version");
                        }
                        return http::json_response(
                            {{"job_id", 1},
                             {"version", 1},
                             {"effective_step", 0},
                             {"policy", "static"},
                             {"tensors",
                              {{{"name", "w"},
                                {"codec", "topk:density=0.01"},
                                {"codec_per_node", {"topk:density=0.01", "topk:density=0.3"}},
                                {"reason", "static"}}}},
                             {"default_codec", "none"},
                             {"predicted_communicate_seconds", nullptr},
                             {"target_ratio", 10.0}});
                      },
                      {.query = {{"job_id", "known_version", "wait_ms"}}});
    const Status started = server_.start();
    if (!started.ok()) throw std::runtime_error(started.to_string());
  }

  std::string url() const { return "127.0.0.1:" + std::to_string(server_.port()); }
  /// The status codes of its answers to GET /v1/policy, in order.
  std::vector<int> policy_answers() const {
    std::lock_guard lock(mutex_);
    return answers_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<int> answers_;
  http::HttpServer server_;  // last: its I/O thread uses the members above
};

// Polls gateway `rank`'s log (bounded: 30 s) until it holds `text`.
bool log_until(bench::LocalJob& job, uint32_t rank, const std::string& text) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (job.gateway(rank).log().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(milliseconds(50));  // polling processes we do not control
  }
  return false;
}

TEST(GatewaysAndController, AControllerWithoutTheNodeViewStillSetsEachGatewaysCodecs) {
  ControllerWithoutNodeView controller;
  bench::LocalJob job(reporting_to(controller.url(), 2, 100));
  auto [w0, w1] = start_endless_workers(job);

  // Each gateway runs its own node's codec of the whole policy.
  EXPECT_TRUE(log_until(job, 0, "codec topk:density=0.01")) << job.gateway(0).log();
  EXPECT_TRUE(log_until(job, 1, "codec topk:density=0.3")) << job.gateway(1).log();
  // Each asked for its node's view first, was refused, and asked for the whole policy.
  const std::vector<int> answers = controller.policy_answers();
  ASSERT_GE(answers.size(), 4u);
  EXPECT_EQ(std::count(answers.begin(), answers.end(), 400), 2) << "one refusal per gateway";
  EXPECT_EQ(std::count(answers.begin(), answers.end(), 200), 2) << "one policy per gateway";
  w0->signal(SIGTERM);
  w1->signal(SIGTERM);
}

// The step that controller `port` last heard of from node `node` of the test jobs (id 77), from
// GET /v1/nodes; 0 when it lists none.
uint64_t step_at_controller(uint16_t port, uint32_t node) {
  const auto listed = nlohmann::json::parse(get_body(port, "/v1/nodes?job_id=77"), nullptr, false);
  if (!listed.is_object() || !listed.contains("nodes")) return 0;
  for (const auto& entry : listed["nodes"]) {
    if (entry.value("node", node + 1) == node) return entry.value("step", uint64_t{0});
  }
  return 0;
}

// Polls `done` (bounded: 30 s) until it holds.
bool eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(20));  // polling processes we do not control
  }
  return true;
}

// Reads gateway `rank`'s /metrics (bounded: 30 s) until `done` holds for it; the last exposition.
std::string metrics_until(const bench::LocalJob& job, uint32_t rank,
                          const std::function<bool(const std::string&)>& done) {
  std::string metrics;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    metrics = get_body(job.admin_port(rank), "/metrics");
    if (done(metrics)) break;
    std::this_thread::sleep_for(milliseconds(20));  // polling a process we do not control
  }
  return metrics;
}

const std::string kReportFailures = "gradgate_control_request_failures_total{exchange=\"report\"}";
const std::string kPolicyFailures = "gradgate_control_request_failures_total{exchange=\"policy\"}";

// The link to the controller moves nothing for longer than control.request_timeout_ms (the
// gateways' host link, saturated): they go fail-static and count the requests that got no answer,
// while their steps go on. Once it flows again they reach the controller, and their next reports
// bring it the steps it missed.
TEST(GatewaysAndController, ALinkStalledPastTheRequestTimeoutIsFailStaticThenCatchesUp) {
  ControllerProcess controller;
  controller.start("none");
  TcpProxy link(controller.port());
  ASSERT_NE(link.port(), 0);
  auto options = reporting_to("127.0.0.1:" + std::to_string(link.port()), 2, 100);
  options.settings = {"control.request_timeout_ms=500", "control.poll_wait_ms=200"};
  bench::LocalJob job(options);
  auto [w0, w1] = start_endless_workers(job);
  ASSERT_TRUE(status_until(job, 0,
                           [](const nlohmann::json& s) {
                             return s.at("policy_version").get<uint32_t>() >= 1 &&
                                    !s.at("fail_static").get<bool>();
                           }))
      << controller.log() << "\n--- gateway 0\n"
      << job.gateway(0).log();
  ASSERT_TRUE(eventually([&] { return step_at_controller(controller.port(), 0) > 0; }));

  link.set_blackhole(true);
  ASSERT_TRUE(status_until(job, 0, [](const nlohmann::json& s) { return s.at("fail_static"); }))
      << job.gateway(0).log();
  const std::string stalled = metrics_until(job, 0, [](const std::string& m) {
    return sample(m, kReportFailures) >= 1 && sample(m, kPolicyFailures) >= 1;
  });
  EXPECT_GE(sample(stalled, kReportFailures), 1) << stalled;
  EXPECT_GE(sample(stalled, kPolicyFailures), 1) << stalled;
  EXPECT_EQ(sample(stalled, "gradgate_fail_static"), 1) << stalled;
  // The steps go on; the controller hears of none of them.
  const uint64_t heard = step_at_controller(controller.port(), 0);
  ASSERT_TRUE(status_until(job, 0, [&](const nlohmann::json& s) {
    return s.at("allreduces").get<uint64_t>() > heard + 20;
  }));
  const uint64_t done_meanwhile = status_of(job, 0).at("allreduces").get<uint64_t>();
  EXPECT_EQ(step_at_controller(controller.port(), 0), heard);

  link.set_blackhole(false);
  EXPECT_TRUE(status_until(job, 0, [](const nlohmann::json& s) { return !s.at("fail_static"); }))
      << job.gateway(0).log();
  EXPECT_TRUE(eventually([&] {
    return step_at_controller(controller.port(), 0) >= done_meanwhile;
  })) << "the controller heard of step "
      << step_at_controller(controller.port(), 0) << ", not " << done_meanwhile;
  EXPECT_TRUE(wait_for_log(job.gateway(0), "controller reachable", milliseconds(5000)))
      << job.gateway(0).log();
  w0->signal(SIGTERM);
  w1->signal(SIGTERM);
}

// A controller stand-in that records every report (the node's step, and the steps its timings
// cover) and answers policy requests 404 at once (no policy for the job yet: the gateways keep
// their codecs). hold() holds its answers to reports, as a slow link would, until release().
class HoldingController {
 public:
  struct Report {
    uint64_t step = 0;
    uint64_t timed_steps = 0;  // timings.steps: those since the node's previous report
    bool held = false;         // came while answers were held
  };
  using Reports = std::vector<Report>;

  HoldingController() : server_(http::ServerOptions{}) {
    server_.add_async_route(
        http::verb::post, "/v1/nodes",
        [this](const http::Request& request, http::Responder respond) {
          const auto report = nlohmann::json::parse(request.body());
          const auto node = report.at("node").get<uint32_t>();
          http::Response answer = http::json_response({{"job_id", report.at("job_id")},
                                                       {"node", node},
                                                       {"policy_version", 0},
                                                       {"report_interval_ms", 100}});
          std::lock_guard lock(mutex_);
          reports_[node].push_back({report.at("step").get<uint64_t>(),
                                    report.at("timings").at("steps").get<uint64_t>(), holding_});
          changed_.notify_all();
          if (holding_) {
            held_.emplace_back(std::move(respond), std::move(answer));
          } else {
            respond(std::move(answer));
          }
        },
        {.json_body = true, .query = {{}}});
    server_.add_route(http::verb::get, "/v1/policy",
                      [](const http::Request&) {
                        return http::problem(http::status::not_found, {}, "no policy yet");
                      },
                      {.query = {{"job_id", "known_version", "wait_ms", "node"}}});
    const Status started = server_.start();
    if (!started.ok()) throw std::runtime_error(started.to_string());
  }

  std::string url() const { return "127.0.0.1:" + std::to_string(server_.port()); }

  void hold() {
    std::lock_guard lock(mutex_);
    holding_ = true;
  }
  /// Sends the answers held so far, and answers at once from now on.
  void release() {
    std::vector<std::pair<http::Responder, http::Response>> held;
    {
      std::lock_guard lock(mutex_);
      holding_ = false;
      held.swap(held_);
    }
    for (auto& [respond, answer] : held) respond(std::move(answer));
  }

  /// The reports of `node` so far, in the order they came.
  Reports reports(uint32_t node) const {
    std::lock_guard lock(mutex_);
    return reports_of(node);
  }
  /// Waits up to `timeout` until `done` holds for the reports of `node`.
  bool wait_for(uint32_t node, const std::function<bool(const Reports&)>& done,
                milliseconds timeout) const {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return done(reports_of(node)); });
  }

 private:
  // Under mutex_.
  const Reports& reports_of(uint32_t node) const {
    static const Reports kNone;
    const auto found = reports_.find(node);
    return found == reports_.end() ? kNone : found->second;
  }

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::map<uint32_t, Reports> reports_;
  bool holding_ = false;
  std::vector<std::pair<http::Responder, http::Response>> held_;
  http::HttpServer server_;  // last: its I/O thread uses the members above
};

// The controller answers a report later than the report interval, within
// control.request_timeout_ms: the report goes through, the gateway is not fail-static, its
// metrics are refreshed every interval meanwhile, and it sends no other report until the answer
// comes; the next one covers every step since the held one, and no report's steps are lost or
// counted twice.
TEST(GatewaysAndController, ASlowAnswerDelaysTheReportsButNotTheMetrics) {
  HoldingController controller;
  auto options = reporting_to(controller.url(), 2, 100);
  options.settings = {"control.request_timeout_ms=30000"};
  bench::LocalJob job(options);
  auto [w0, w1] = start_endless_workers(job);
  ASSERT_TRUE(status_until(
      job, 0, [](const nlohmann::json& s) { return s.at("allreduces").get<uint64_t>() >= 10; }));

  controller.hold();
  const auto holds = [](const HoldingController::Reports& r) {
    return !r.empty() && r.back().held;
  };
  ASSERT_TRUE(controller.wait_for(0, holds, milliseconds(10000)));
  const std::size_t held = controller.reports(0).size() - 1;
  // The gateway's transport byte counts, mirrored at every refresh, move on while the report waits
  // (its workers keep all-reducing): three refreshes, each an interval after the last.
  const std::string sent = "gradgate_transport_sent_bytes_total";
  std::set<double> refreshed;
  std::string metrics;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (refreshed.size() < 4 && std::chrono::steady_clock::now() < deadline) {
    metrics = get_body(job.admin_port(0), "/metrics");
    refreshed.insert(sample(metrics, sent));
    EXPECT_EQ(sample(metrics, "gradgate_fail_static"), 0) << metrics;
    std::this_thread::sleep_for(milliseconds(20));  // polling a process we do not control
  }
  EXPECT_EQ(refreshed.size(), 4u) << "the metrics were not refreshed while the report waited\n"
                                  << metrics;
  EXPECT_EQ(controller.reports(0).size(), held + 1) << "one report at a time";

  controller.release();
  ASSERT_TRUE(controller.wait_for(
      0, [&](const HoldingController::Reports& r) { return r.size() >= held + 4; },
      milliseconds(10000)));
  const auto reports = controller.reports(0);
  EXPECT_GT(reports[held + 1].step, reports[held].step) << "the steps run meanwhile";
  for (std::size_t i = 0; i < reports.size(); ++i) {
    const uint64_t since = i == 0 ? 0 : reports[i - 1].step;
    EXPECT_EQ(reports[i].timed_steps, reports[i].step - since) << "report " << i;
  }
  const std::string after = get_body(job.admin_port(0), "/metrics");
  EXPECT_EQ(sample(after, kReportFailures), 0) << after;
  EXPECT_EQ(sample(after, kPolicyFailures), 0) << after;
  EXPECT_EQ(sample(after, "gradgate_fail_static"), 0) << after;
  EXPECT_EQ(job.gateway(0).log().find("controller unreachable"), std::string::npos)
      << job.gateway(0).log();
  w0->signal(SIGTERM);
  w1->signal(SIGTERM);
}

}  // namespace
}  // namespace gradgate::gateway::testing
