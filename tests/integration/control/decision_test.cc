// Deciding: measurements from the reports of a job's nodes go through the policy; a changed
// decision becomes a new version that takes effect ahead of the job's step; on a fast link the
// bandwidth policy sends dense (break-even); DAGC splits the traffic budget by data volume; a job's
// policy runs at most once per policy.min_interval_ms, and a run held back is made without a
// further report.
#include "api_cases.h"

namespace gradgate::control::testing {
namespace {

constexpr double k50MbitPerSecond = 50e6 / 8;
constexpr double k10GbitPerSecond = 10e9 / 8;

nlohmann::json with_link(nlohmann::json body, uint32_t peer, double goodput) {
  body["links"] = {{{"peer", peer},
                    {"goodput_bytes_per_second", goodput},
                    {"rtt_seconds", 0.0002},
                    {"age_seconds", 0.2}}};
  return body;
}

nlohmann::json with_tensors(nlohmann::json body) {
  body["tensors"] = {{{"name", "fc1.weight"}, {"elements", 4 << 20}},
                     {{"name", "fc1.bias"}, {"elements", 100}}};
  return body;
}

class DecisionTest : public ControlFixture {
 protected:
  void SetUp() override {
    ControlConfig config = test_config();
    config.policy.name = "bandwidth";
    config.policy.target_communicate_seconds = 0.1;
    config.min_lead_steps = 4;
    start(config);
  }
};

TEST_F(DecisionTest, SlowLinkCompressesFastLinkSendsDense) {
  TestClient client = connect();
  post_report(client, report(1, 1, 2, 120));
  const nlohmann::json reply =
      post_report(client, with_tensors(with_link(report(1, 0, 2, 100), 1, k50MbitPerSecond)));
  EXPECT_EQ(reply["policy_version"], 1);
  EXPECT_EQ(reply["report_interval_ms"], 1000);

  const nlohmann::json slow = get(client, "/v1/policy?job_id=1");
  EXPECT_EQ(slow["version"], 1);
  EXPECT_EQ(slow["policy"], "bandwidth");
  EXPECT_EQ(slow["effective_step"], 120 + 4);  // max step of the nodes + min_lead_steps
  ASSERT_EQ(slow["tensors"].size(), 2u);
  const nlohmann::json& weight = slow["tensors"][0];
  EXPECT_EQ(weight["name"], "fc1.weight");
  EXPECT_EQ(weight["codec"].get<std::string>().rfind("topk:", 0), 0u) << weight;
  EXPECT_EQ(weight["codec_per_node"].size(), 2u);
  EXPECT_EQ(slow["tensors"][1]["codec"], "none");  // small tensor
  EXPECT_EQ(slow["tensors"][1]["reason"], "small tensor");
  EXPECT_GT(slow["target_ratio"].get<double>(), 10.0);
  EXPECT_LE(slow["predicted_communicate_seconds"].get<double>(), 0.1);

  post_report(client, with_link(report(1, 0, 2, 100), 1, k10GbitPerSecond));
  const nlohmann::json fast = get(client, "/v1/policy?job_id=1");
  EXPECT_EQ(fast["version"], 2);
  EXPECT_EQ(fast["tensors"][0]["codec"], "none");
  EXPECT_EQ(fast["tensors"][0]["codec_per_node"], nlohmann::json({"none", "none"}));
  EXPECT_DOUBLE_EQ(fast["target_ratio"].get<double>(), 1.0);

  // The same measurements again: the same decision, no new version.
  EXPECT_EQ(
      post_report(client, with_link(report(1, 0, 2, 100), 1, k10GbitPerSecond))["policy_version"],
      2);

  get(client, "/v1/jobs/1");
  EXPECT_EQ(client.send_json(verb::post, "/v1/nodes", "{}").result(), status::unauthorized);
  EXPECT_EQ(client.send(verb::get, "/v1/nowhere").result(), status::not_found);
  const std::string metrics = client.send(verb::get, "/metrics").body();
  EXPECT_NE(metrics.find(R"(gradgate_controller_policy_version{job_id="1"} 2)"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find(R"(gradgate_controller_decisions_total{job_id="1",policy="bandwidth"} 2)"),
            std::string::npos);
  EXPECT_NE(
      metrics.find(
          R"(gradgate_controller_link_bandwidth_bytes_per_second{from="1",job_id="1",to="0"} 1250000000)"),
      std::string::npos);
  EXPECT_NE(metrics.find(R"(gradgate_controller_target_ratio{job_id="1"} 1)"), std::string::npos);
  EXPECT_NE(metrics.find(R"(gradgate_build_info{component="controller")"), std::string::npos);
  EXPECT_NE(
      metrics.find(R"(gradgate_controller_http_requests_total{code="200",route="/v1/nodes"} 4)"),
      std::string::npos);
  EXPECT_NE(metrics.find(
                R"(gradgate_controller_http_requests_total{code="200",route="/v1/jobs/{id}"} 1)"),
            std::string::npos);
  EXPECT_NE(
      metrics.find(R"(gradgate_controller_http_requests_total{code="401",route="/v1/nodes"} 1)"),
      std::string::npos);
  EXPECT_NE(
      metrics.find(R"(gradgate_controller_http_requests_total{code="404",route="unmatched"} 1)"),
      std::string::npos);
}

TEST_F(DecisionTest, LinksOfAStaleNodeLeaveThePolicyInput) {
  server_.reset();
  ControlConfig config = test_config();
  config.policy.name = "bandwidth";
  config.policy.default_codec = "fp16";  // the codec without a link sample
  config.report_interval = std::chrono::milliseconds(20);
  config.stale_after = std::chrono::milliseconds(100);
  start(config);
  TestClient client = connect();
  post_report(client, with_tensors(with_link(report(1, 0, 2, 10), 1, k50MbitPerSecond)));
  const nlohmann::json before = get(client, "/v1/policy?job_id=1");
  ASSERT_NE(before["predicted_communicate_seconds"], nullptr);

  // Node 1 keeps reporting (without links) until node 0 is stale and a decision is made.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  nlohmann::json after = before;
  while (after["version"] == before["version"] && std::chrono::steady_clock::now() < deadline) {
    post_report(client, report(1, 1, 2, 10));
    after = get(client, "/v1/policy?job_id=1");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // poll interval
  }
  EXPECT_GT(after["version"], before["version"]);
  EXPECT_EQ(after["predicted_communicate_seconds"], nullptr);  // no link sample left
  EXPECT_EQ(after["tensors"][0]["reason"], "no bandwidth sample");
}

TEST_F(DecisionTest, DagcSplitsTheTrafficBudgetByDataVolume) {
  TestClient client = connect();
  const Reply put = client.send_json(
      verb::put, "/v1/policy", R"({"policy":"dagc-r","ladder":["topk:density=0.01"]})", bearer());
  ASSERT_EQ(put.result(), status::ok) << put.body();
  ASSERT_EQ(
      client.send_json(verb::put, "/v1/budget", R"({"traffic_budget":0.02})", bearer()).result(),
      status::ok);
  nlohmann::json big = with_tensors(with_link(report(1, 0, 2, 10), 1, k50MbitPerSecond));
  big["workers"] = {{{"local_rank", 0}, {"data_volume", 30000}},
                    {{"local_rank", 1}, {"data_volume", 30000}}};
  nlohmann::json small = with_link(report(1, 1, 2, 10), 0, k50MbitPerSecond);
  small["workers"] = {{{"local_rank", 0}, {"data_volume", 20000}}};
  post_report(client, small);
  post_report(client, big);

  const nlohmann::json budget = get(client, "/v1/budget?job_id=1");
  EXPECT_DOUBLE_EQ(budget["traffic_budget"].get<double>(), 0.02);
  ASSERT_EQ(budget["nodes"].size(), 2u);
  EXPECT_DOUBLE_EQ(budget["nodes"][0]["data_volume"].get<double>(), 60000);
  const double big_keep = budget["nodes"][0]["keep_fraction"].get<double>();
  const double small_keep = budget["nodes"][1]["keep_fraction"].get<double>();
  EXPECT_GT(big_keep, small_keep);  // more data, milder compression
  EXPECT_NEAR((big_keep + small_keep) / 2, 0.02, 1e-3);

  const nlohmann::json policy = get(client, "/v1/policy?job_id=1");
  EXPECT_EQ(policy["policy"], "dagc-r");
  EXPECT_NE(policy["tensors"][0]["codec_per_node"][0], policy["tensors"][0]["codec_per_node"][1]);
  // Each gateway's view holds its own codecs only.
  for (int node : {0, 1}) {
    const nlohmann::json view = get(client, "/v1/policy?job_id=1&node=" + std::to_string(node));
    EXPECT_EQ(view["node"], node);
    EXPECT_EQ(view["version"], policy["version"]);
    EXPECT_EQ(view["effective_step"], policy["effective_step"]);
    ASSERT_EQ(view["tensors"].size(), policy["tensors"].size());
    for (std::size_t t = 0; t < view["tensors"].size(); ++t) {
      EXPECT_EQ(view["tensors"][t]["codec"], policy["tensors"][t]["codec_per_node"][node]);
      EXPECT_FALSE(view["tensors"][t].contains("codec_per_node"));
    }
  }

  // The budget is part of the settings; clearing it goes back to the ladder's density.
  EXPECT_DOUBLE_EQ(get(client, "/v1/policy")["traffic_budget"].get<double>(), 0.02);
  ASSERT_EQ(
      client.send_json(verb::put, "/v1/budget", R"({"traffic_budget":null})", bearer()).result(),
      status::ok);
  EXPECT_EQ(get(client, "/v1/budget?job_id=1")["traffic_budget"], nullptr);
}

// A gateway whose workers report no data volume (the Python hook's default) leaves dagc nothing
// to split by: every gateway gets the uniform codec, and the reason says why.
TEST_F(DecisionTest, DagcWithoutADataVolumeOfEveryGatewayStaysUniformAndSaysSo) {
  TestClient client = connect();
  const Reply put = client.send_json(
      verb::put, "/v1/policy", R"({"policy":"dagc-r","ladder":["topk:density=0.01"]})", bearer());
  ASSERT_EQ(put.result(), status::ok) << put.body();
  nlohmann::json measured = with_tensors(with_link(report(1, 0, 2, 10), 1, k50MbitPerSecond));
  measured["workers"] = {{{"local_rank", 0}, {"data_volume", 30000}}};
  nlohmann::json silent = with_link(report(1, 1, 2, 10), 0, k50MbitPerSecond);
  silent["workers"] = {{{"local_rank", 0}, {"data_volume", 0}}};
  post_report(client, silent);
  post_report(client, measured);

  const nlohmann::json policy = get(client, "/v1/policy?job_id=1");
  ASSERT_FALSE(policy["tensors"].empty()) << policy;
  const nlohmann::json& tensor = policy["tensors"][0];
  EXPECT_EQ(tensor["reason"], "no data-volume sample") << policy;
  EXPECT_EQ(tensor["codec_per_node"][0], tensor["codec_per_node"][1]) << policy;
}

// A 16-bit tensor's raw bytes are 2 per element, as the gateways count them: the same top-k
// frames against half the raw bytes give half the target ratio of an fp32 tensor.
TEST_F(DecisionTest, TargetRatiosCountSixteenBitTensorsInTheirDtype) {
  TestClient client = connect();
  const Reply put =
      client.send_json(verb::put, "/v1/policy",
                       R"({"policy":"static","default_codec":"topk:density=0.01"})", bearer());
  ASSERT_EQ(put.result(), status::ok) << put.body();
  for (const uint64_t job : {1, 2}) {
    for (const uint32_t node : {0u, 1u}) {
      nlohmann::json body = with_link(report(job, node, 2, 10), 1 - node, k50MbitPerSecond);
      body["tensors"] = {{{"name", "w"}, {"elements", 1 << 20}}};
      if (job == 2) body["tensors"][0]["dtype"] = "bf16";
      post_report(client, body);
    }
  }
  const double fp32 = get(client, "/v1/policy?job_id=1")["target_ratio"].get<double>();
  const double bf16 = get(client, "/v1/policy?job_id=2")["target_ratio"].get<double>();
  EXPECT_GT(fp32, 10.0);
  EXPECT_NEAR(bf16 / fp32, 0.5, 1e-3) << fp32 << " " << bf16;
}

TEST_F(DecisionTest, PutPolicyStoresTheSettingsAndRedecidesEveryJob) {
  TestClient client = connect();
  post_report(client, with_tensors(with_link(report(1, 0, 2, 10), 1, k50MbitPerSecond)));
  post_report(client, with_tensors(with_link(report(2, 0, 2, 10), 1, k50MbitPerSecond)));
  const Reply put = client.send_json(
      verb::put, "/v1/policy",
      R"({"policy":"static","default_codec":"fp16","rules":[{"glob":"*.bias","codec":"none"}],
          "warmup_steps":0,"min_compress_elements":0})",
      bearer());
  ASSERT_EQ(put.result(), status::ok) << put.body();
  const nlohmann::json stored = body_of(put);
  EXPECT_EQ(stored["policy"], "static");
  EXPECT_EQ(stored["rules"][0]["glob"], "*.bias");
  EXPECT_EQ(stored["ladder"], get(client, "/v1/policy")["ladder"]);  // from the configuration
  for (int job : {1, 2}) {
    const nlohmann::json policy = get(client, "/v1/policy?job_id=" + std::to_string(job));
    EXPECT_EQ(policy["version"], 2);
    EXPECT_EQ(policy["default_codec"], "fp16");
    EXPECT_EQ(policy["tensors"][1]["reason"], "rule *.bias");
  }
}

TEST_F(DecisionTest, ARuleThatAppliesToNoTensorIsListedAndCounted) {
  TestClient client = connect();
  const Reply put = client.send_json(
      verb::put, "/v1/policy",
      R"({"policy":"static","default_codec":"fp16","rules":[{"glob":"*.bias","codec":"none"},
          {"glob":"*.running_mean","codec":"none"}]})",
      bearer());
  ASSERT_EQ(put.result(), status::ok) << put.body();
  post_report(client, with_tensors(report(1, 0, 2, 10)));  // fc1.weight, fc1.bias
  EXPECT_EQ(get(client, "/v1/jobs/1")["unused_rules"], nlohmann::json({"*.running_mean"}));
  const std::string metrics = client.send(verb::get, "/metrics").body();
  EXPECT_NE(metrics.find(R"(gradgate_controller_unused_rules{job_id="1"} 1)"), std::string::npos)
      << metrics;
}

TEST_F(DecisionTest, AfterARestartNumberingWaitsForEveryNodeAndGoesAboveWhatTheyHold) {
  // Gateways that outlived a controller restart: both apply version 7, and node 1 has already
  // received 9, which takes effect later. A version 8 made on node 0's report alone would be
  // ignored by node 1 (it holds newer) and taken by node 0.
  TestClient client = connect();
  nlohmann::json first = with_tensors(with_link(report(1, 0, 2, 10), 1, k50MbitPerSecond));
  first["policy_version"] = 7;
  first["received_policy_version"] = 7;
  EXPECT_EQ(post_report(client, first)["policy_version"], 0);
  nlohmann::json second = with_link(report(1, 1, 2, 10), 0, k50MbitPerSecond);
  second["policy_version"] = 7;
  second["received_policy_version"] = 9;
  EXPECT_EQ(post_report(client, second)["policy_version"], 10);
  EXPECT_EQ(get(client, "/v1/policy?job_id=1")["version"], 10);
}

TEST_F(DecisionTest, GatewaysThatRestartedGetTheirCodecsAgainFromTheirNewSteps) {
  TestClient client = connect();
  post_report(client, with_link(report(1, 1, 2, 5000), 0, k50MbitPerSecond));
  post_report(client, with_tensors(with_link(report(1, 0, 2, 5000), 1, k50MbitPerSecond)));
  const nlohmann::json before = get(client, "/v1/policy?job_id=1");
  ASSERT_EQ(before["version"], 1);
  EXPECT_EQ(before["effective_step"], 5004);

  // The job's gateways restart (a rollout, say) and count from step 0 again: the same codecs
  // come as a new version that takes effect within the lead, not 5000 steps later.
  EXPECT_EQ(
      post_report(client, with_link(report(1, 1, 2, 2), 0, k50MbitPerSecond))["policy_version"], 1)
      << "node 0 has not restarted yet";
  EXPECT_EQ(post_report(client, with_tensors(with_link(report(1, 0, 2, 3), 1,
                                                       k50MbitPerSecond)))["policy_version"],
            2);
  const nlohmann::json after = get(client, "/v1/policy?job_id=1");
  EXPECT_EQ(after["effective_step"], 3 + 4);
  EXPECT_EQ(after["tensors"], before["tensors"]);

  // The steps go on from there: no further version.
  EXPECT_EQ(
      post_report(client, with_link(report(1, 1, 2, 50), 0, k50MbitPerSecond))["policy_version"],
      2);
}

// The number of runs of the controller's policies so far, from its /metrics.
int policy_runs(TestClient& client) {
  const std::string metrics = client.send(verb::get, "/metrics").body();
  const std::string name = "gradgate_controller_policy_run_seconds_count ";
  const auto at = metrics.find(name);
  return at == std::string::npos ? -1 : std::stoi(metrics.substr(at + name.size()));
}

TEST_F(DecisionTest, ReportsWithinTheMinimumIntervalDoNotRunThePolicyAgain) {
  server_.reset();
  ControlConfig config = test_config();
  config.policy.name = "bandwidth";
  config.min_interval = std::chrono::minutes(1);
  start(config);
  TestClient client = connect();
  post_report(client, with_tensors(with_link(report(1, 0, 2, 10), 1, k50MbitPerSecond)));
  EXPECT_EQ(policy_runs(client), 1);
  for (uint64_t step = 11; step <= 30; ++step) {
    EXPECT_EQ(post_report(client, with_link(report(1, step % 2, 2, step), 1 - step % 2,
                                            k10GbitPerSecond))["policy_version"],
              1);
  }
  // Twenty reports, each of which would have cost a run of the whole nodes x tensors decision.
  EXPECT_EQ(policy_runs(client), 1);
  EXPECT_EQ(get(client, "/v1/policy?job_id=1")["version"], 1);
}

TEST_F(DecisionTest, ARunHeldBackByTheIntervalIsMadeWithoutAnotherReport) {
  server_.reset();
  ControlConfig config = test_config();
  config.policy.name = "bandwidth";
  config.min_interval = std::chrono::milliseconds(200);
  config.report_interval = std::chrono::milliseconds(50);  // the tick that makes pending runs
  start(config);
  TestClient client = connect();
  post_report(client, with_tensors(with_link(report(1, 0, 2, 10), 1, k50MbitPerSecond)));
  const auto faster =
      post_report(client, with_tensors(with_link(report(1, 0, 2, 11), 1, k10GbitPerSecond)));
  ASSERT_EQ(faster["policy_version"], 1) << "the second report came after the interval";

  // No further report: the pending run is made once the interval is over, and answers the poll.
  const nlohmann::json polled = get(client, "/v1/policy?job_id=1&known_version=1&wait_ms=20000");
  EXPECT_EQ(polled["version"], 2);
  EXPECT_EQ(polled["tensors"][0]["codec"], "none");  // the fast link: dense
  EXPECT_EQ(policy_runs(client), 2);
}

}  // namespace
}  // namespace gradgate::control::testing
