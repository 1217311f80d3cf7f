// Ranks by name over HTTP (POST /v1/jobs/{id}/ranks): gateways of one configuration claim their
// ranks, get them back after a restart, register with them, and a full job is refused until a
// holder dies.
#include <thread>

#include "api_cases.h"

namespace gradgate::control::testing {
namespace {

class RankTest : public ControlFixture {
 protected:
  Reply claim(TestClient& client, uint64_t job_id, const std::string& name, uint32_t nodes) {
    return client.send_json(verb::post, "/v1/jobs/" + std::to_string(job_id) + "/ranks",
                            nlohmann::json{{"name", name}, {"nodes", nodes}}.dump(), bearer());
  }

  /// A claim that must succeed; returns the rank.
  uint32_t claimed_rank(TestClient& client, uint64_t job_id, const std::string& name,
                        uint32_t nodes) {
    const Reply reply = claim(client, job_id, name, nodes);
    EXPECT_EQ(reply.result(), status::ok) << reply.body();
    const nlohmann::json body = body_of(reply);
    EXPECT_EQ(body, (nlohmann::json{{"job_id", job_id},
                                    {"name", name},
                                    {"node", body.value("node", 0u)},
                                    {"nodes", nodes}}));
    return body.value("node", nodes);
  }
};

TEST_F(RankTest, NamesGetTheLowestFreeRanksAndKeepThem) {
  start();
  TestClient client = connect();
  EXPECT_EQ(claimed_rank(client, 9, "worker-a", 3), 0u);
  EXPECT_EQ(claimed_rank(client, 9, "worker-b", 3), 1u);
  // A restarted pod on the same node gets its rank back.
  EXPECT_EQ(claimed_rank(client, 9, "worker-a", 3), 0u);
  EXPECT_EQ(claimed_rank(client, 9, "worker-c", 3), 2u);
  // Another job has its own ranks.
  EXPECT_EQ(claimed_rank(client, 10, "worker-c", 3), 0u);
}

TEST_F(RankTest, ClaimantsRegisterWithTheirRanksAndTheJobShowsTheirNames) {
  start();
  TestClient client = connect();
  for (const std::string name : {"worker-a", "worker-b"}) {
    post_report(client, report(9, claimed_rank(client, 9, name, 2), 2));
  }
  const nlohmann::json nodes = get(client, "/v1/jobs/9")["nodes"];
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0]["name"], "worker-a");
  EXPECT_EQ(nodes[1]["name"], "worker-b");
  EXPECT_EQ(get(client, "/v1/nodes?job_id=9")["nodes"][1]["name"], "worker-b");
}

TEST_F(RankTest, AFullJobIsRefusedNamingItsHolders) {
  start();
  TestClient client = connect();
  claimed_rank(client, 9, "worker-a", 2);
  claimed_rank(client, 9, "worker-b", 2);
  expect_problem(claim(client, 9, "worker-c", 2), status::conflict, "",
                 "job 9: all 2 ranks are held by live gateways: worker-a=0, worker-b=1");
}

TEST_F(RankTest, AGatewayWithAFixedRankKeepsItFromClaimants) {
  start();
  TestClient client = connect();
  post_report(client, report(9, 0, 2));
  EXPECT_EQ(claimed_rank(client, 9, "worker-a", 2), 1u);
  expect_problem(claim(client, 9, "worker-b", 2), status::conflict, "", "?=0, worker-a=1");
}

TEST_F(RankTest, ANewJobSizeWins) {
  start();
  TestClient client = connect();
  for (const std::string name : {"worker-a", "worker-b", "worker-c"}) {
    claimed_rank(client, 9, name, 3);
  }
  EXPECT_EQ(claimed_rank(client, 9, "worker-b", 2), 1u);
  expect_problem(claim(client, 9, "worker-c", 2), status::conflict, "", "all 2 ranks");
  EXPECT_EQ(claimed_rank(client, 9, "worker-c", 4), 2u);
}

TEST_F(RankTest, ADeadHoldersRankGoesToANewName) {
  ControlConfig config = test_config();
  config.report_interval = std::chrono::milliseconds(20);
  config.stale_after = std::chrono::milliseconds(150);
  start(config);
  TestClient client = connect();
  claimed_rank(client, 9, "worker-a", 2);
  post_report(client, report(9, claimed_rank(client, 9, "worker-b", 2), 2));

  // worker-b keeps reporting; worker-a is silent and dies once its claim is stale_after old.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  Reply reply = claim(client, 9, "worker-c", 2);
  while (reply.result() == status::conflict && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // poll interval
    post_report(client, report(9, 1, 2));
    reply = claim(client, 9, "worker-c", 2);
  }
  ASSERT_EQ(reply.result(), status::ok) << reply.body();
  EXPECT_EQ(body_of(reply)["node"], 0);
  // worker-a lost its rank: back, it finds worker-c's fresh claim and worker-b's live gateway.
  expect_problem(claim(client, 9, "worker-a", 2), status::conflict, "", "worker-c=0, worker-b=1");
}

}  // namespace
}  // namespace gradgate::control::testing
