// Membership: who reported, where gateways are, which nodes are stale; a restarted gateway
// replaces its predecessor; a job that changes size.
#include <thread>

#include "api_cases.h"

namespace gradgate::control::testing {
namespace {

class MembershipTest : public ControlFixture {};

TEST_F(MembershipTest, JobsNodesAndLinksShowTheReports) {
  start();
  TestClient client = connect();
  register_known_job(client);
  post_report(client, report(7, 0, 1, 3));

  const nlohmann::json jobs = get(client, "/v1/jobs")["jobs"];
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[1]["job_id"], 42);
  EXPECT_EQ(jobs[1]["nodes"], 2);
  EXPECT_EQ(jobs[1]["registered"], 2);
  EXPECT_EQ(jobs[1]["stale"], 0);
  EXPECT_EQ(jobs[1]["step"], 10);
  EXPECT_EQ(jobs[1]["policy_version"], 1);

  const nlohmann::json job = get(client, "/v1/jobs/42");
  EXPECT_EQ(job["job_id"], 42);
  ASSERT_EQ(job["nodes"].size(), 2u);
  EXPECT_EQ(job["nodes"][1]["node"], 1);
  EXPECT_EQ(job["nodes"][1]["address"], "127.0.0.1:4001");
  EXPECT_EQ(job["nodes"][1]["admin"], "127.0.0.1:9101");
  EXPECT_EQ(job["nodes"][1]["stale"], false);
  EXPECT_GE(job["nodes"][1]["age_seconds"].get<double>(), 0.0);

  EXPECT_EQ(get(client, "/v1/nodes")["nodes"].size(), 3u);
  const nlohmann::json nodes = get(client, "/v1/nodes?job_id=7")["nodes"];
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0]["job_id"], 7);
  EXPECT_EQ(nodes[0]["step"], 3);
  EXPECT_EQ(nodes[0]["policy_version"], 0);
  EXPECT_EQ(nodes[0]["fail_static"], false);

  const nlohmann::json links = get(client, "/v1/links?job_id=42")["links"];
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0]["from"], 1);  // measured by node 0 on arrival of node 1's messages
  EXPECT_EQ(links[0]["to"], 0);
  EXPECT_DOUBLE_EQ(links[0]["goodput_bytes_per_second"].get<double>(), 1.25e8);
  EXPECT_GE(links[0]["age_seconds"].get<double>(), 0.1);

  // A job without a decision yet: version 0, no tensors, gateways keep their configuration.
  const nlohmann::json undecided = get(client, "/v1/policy?job_id=7");
  EXPECT_EQ(undecided["version"], 0);
  EXPECT_TRUE(undecided["tensors"].empty());
}

TEST_F(MembershipTest, SilentNodeBecomesStale) {
  ControlConfig config = test_config();
  config.report_interval = std::chrono::milliseconds(20);
  config.stale_after = std::chrono::milliseconds(150);
  start(config);
  TestClient client = connect();
  post_report(client, report(5, 0, 2));
  post_report(client, report(5, 1, 2));
  EXPECT_EQ(get(client, "/v1/nodes?job_id=5")["nodes"][0]["stale"], false);

  // Node 1 keeps reporting; node 0 is silent.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  nlohmann::json nodes;
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // poll interval
    post_report(client, report(5, 1, 2));
    nodes = get(client, "/v1/nodes?job_id=5")["nodes"];
  } while (nodes[0]["stale"] == false && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(nodes[0]["stale"], true);
  EXPECT_GE(nodes[0]["age_seconds"].get<double>(), 0.15);
  EXPECT_EQ(nodes[1]["stale"], false);
  EXPECT_EQ(get(client, "/v1/jobs")["jobs"][0]["stale"], 1);
  // The gauges follow within a refresh interval (the shorter of report interval and staleness).
  const std::string stale_gauge = R"(gradgate_controller_nodes{state="stale"} 1)";
  std::string metrics = client.send(verb::get, "/metrics").body();
  while (metrics.find(stale_gauge) == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // poll interval
    metrics = client.send(verb::get, "/metrics").body();
  }
  EXPECT_NE(metrics.find(stale_gauge), std::string::npos) << metrics;
  EXPECT_NE(metrics.find(R"(gradgate_controller_nodes{state="live"} 1)"), std::string::npos);
  EXPECT_NE(metrics.find("gradgate_controller_jobs 1"), std::string::npos);

  // A report brings it back.
  post_report(client, report(5, 0, 2));
  EXPECT_EQ(get(client, "/v1/nodes?job_id=5")["nodes"][0]["stale"], false);
}

TEST_F(MembershipTest, SilentJobIsForgottenAndComesBackAfresh) {
  ControlConfig config = test_config();
  config.report_interval = std::chrono::milliseconds(20);
  config.stale_after = std::chrono::milliseconds(50);
  config.forget_after = std::chrono::milliseconds(300);
  start(config);
  TestClient client = connect();
  // Job 77 claims ranks but never reports; job 42 reports once; job 5 keeps reporting.
  for (const char* name : {"node-a", "node-b"}) {
    const Reply claimed =
        client.send_json(verb::post, "/v1/jobs/77/ranks",
                         nlohmann::json{{"name", name}, {"nodes", 2}}.dump(), bearer());
    ASSERT_EQ(claimed.result(), status::ok) << claimed.body();
  }
  register_known_job(client);
  const auto reported = std::chrono::steady_clock::now();
  std::string metrics = client.send(verb::get, "/metrics").body();
  EXPECT_NE(metrics.find(R"(gradgate_controller_policy_version{job_id="42"} 1)"), std::string::npos)
      << metrics;

  const auto deadline = reported + std::chrono::seconds(10);
  status found = status::ok;
  while (found == status::ok && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // poll interval
    post_report(client, report(5, 0, 1));
    found = client.send(verb::get, "/v1/jobs/42").result();
  }
  ASSERT_EQ(found, status::not_found) << "job 42 was never forgotten";
  EXPECT_GE(std::chrono::steady_clock::now() - reported, config.forget_after);
  EXPECT_EQ(get(client, "/v1/jobs")["jobs"].size(), 1u);  // job 5 reports: it stays
  metrics = client.send(verb::get, "/metrics").body();
  EXPECT_EQ(metrics.find(R"(job_id="42")"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("gradgate_controller_jobs 1"), std::string::npos) << metrics;

  // Job 77's claims went with it: node-b now gets the lowest rank instead of its old one.
  const Reply again =
      client.send_json(verb::post, "/v1/jobs/77/ranks",
                       nlohmann::json{{"name", "node-b"}, {"nodes", 2}}.dump(), bearer());
  EXPECT_EQ(body_of(again).value("node", 99u), 0u) << again.body();

  // Job 42's gateways come back applying version 1: once both have reported, its numbering goes
  // on from there.
  for (uint32_t node : {0u, 1u}) {
    nlohmann::json back = report(42, node, 2, 20);
    back["policy_version"] = 1;
    back["tensors"] = {{{"name", "fc1.weight"}, {"elements", 1 << 20}}};
    post_report(client, back);
  }
  EXPECT_EQ(get(client, "/v1/policy?job_id=42")["version"], 2);
}

// A fleet of misconfigured job ids must not grow the controller without bound: beyond
// nodes.max_jobs a new job's reports and rank claims are refused (503, counted), known jobs go on.
TEST_F(MembershipTest, NewJobsBeyondMaxJobsAreRefusedAndKnownOnesGoOn) {
  ControlConfig config = test_config();
  config.max_jobs = 2;
  start(config);
  TestClient client = connect();
  post_report(client, report(1, 0, 1));
  post_report(client, report(2, 0, 1));
  const Reply refused = client.send_json(verb::post, "/v1/nodes", report(3, 0, 1).dump(), bearer());
  EXPECT_EQ(refused.result(), status::service_unavailable) << refused.body();
  EXPECT_NE(body_of(refused).value("detail", "").find("at most 2 jobs (nodes.max_jobs)"),
            std::string::npos)
      << refused.body();
  post_report(client, report(1, 0, 1, 5));  // a known job reports on
  EXPECT_EQ(get(client, "/v1/jobs")["jobs"].size(), 2u);
  EXPECT_NE(client.send(verb::get, "/metrics")
                .body()
                .find(R"(gradgate_controller_report_errors_total{kind="too_many_jobs"} 1)"),
            std::string::npos);

  // Rank claims: the table holds claims of at most two jobs.
  for (const char* job : {"11", "12", "13"}) {
    const Reply claimed =
        client.send_json(verb::post, std::string("/v1/jobs/") + job + "/ranks",
                         nlohmann::json{{"name", "node-a"}, {"nodes", 1}}.dump(), bearer());
    EXPECT_EQ(claimed.result(), job == std::string("13") ? status::service_unavailable : status::ok)
        << job << ": " << claimed.body();
  }
}

TEST_F(MembershipTest, RestartedGatewayReplacesItsPredecessor) {
  start();
  TestClient client = connect();
  post_report(client, report(3, 0, 2));
  nlohmann::json restarted = report(3, 0, 2);
  restarted["address"] = "10.0.0.9:4000";
  post_report(client, restarted);
  const nlohmann::json nodes = get(client, "/v1/jobs/3")["nodes"];
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0]["address"], "10.0.0.9:4000");
}

TEST_F(MembershipTest, ANewJobSizeDropsNodesBeyondIt) {
  start();
  TestClient client = connect();
  for (uint32_t node = 0; node < 3; ++node) post_report(client, report(3, node, 3));
  post_report(client, report(3, 0, 2));
  const nlohmann::json jobs = get(client, "/v1/jobs")["jobs"];
  EXPECT_EQ(jobs[0]["nodes"], 2);
  EXPECT_EQ(jobs[0]["registered"], 2);
}

}  // namespace
}  // namespace gradgate::control::testing
