// GET /v1/policy?job_id=&known_version=&wait_ms=: a long poll answers as soon as the job gets a
// newer version, at once when the caller is behind, and with the same version at the deadline.
#include <future>

#include "api_cases.h"

namespace gradgate::control::testing {
namespace {

using Clock = std::chrono::steady_clock;

class LongPollTest : public ControlFixture {
 protected:
  void SetUp() override {
    start();
    TestClient client = connect();
    register_known_job(client);
    ASSERT_EQ(get(client, "/v1/policy?job_id=42")["version"], 1);
  }

  // Polls on a connection of its own; returns the body and how long the answer took.
  std::pair<nlohmann::json, Clock::duration> poll(const std::string& query) {
    TestClient client = connect();
    const Clock::time_point sent = Clock::now();
    const Reply reply = client.send(verb::get, "/v1/policy?job_id=42&" + query);
    const Clock::duration took = Clock::now() - sent;
    EXPECT_EQ(reply.result(), status::ok) << reply.body();
    return {body_of(reply), took};
  }
};

TEST_F(LongPollTest, AnswersWhenANewVersionIsMade) {
  auto waiting =
      std::async(std::launch::async, [this] { return poll("known_version=1&wait_ms=20000"); });
  TestClient client = connect();
  const Reply put = client.send_json(verb::put, "/v1/policy",
                                     R"({"policy":"static","default_codec":"fp16"})", bearer());
  ASSERT_EQ(put.result(), status::ok) << put.body();
  const auto [body, took] = waiting.get();
  EXPECT_EQ(body["version"], 2);
  EXPECT_EQ(body["tensors"][0]["codec"], "fp16");
  EXPECT_LT(took, std::chrono::seconds(10));
}

TEST_F(LongPollTest, AnswersAtOnceWhenTheCallerIsBehind) {
  const auto [body, took] = poll("known_version=0&wait_ms=20000");
  EXPECT_EQ(body["version"], 1);
  EXPECT_LT(took, std::chrono::seconds(10));
}

TEST_F(LongPollTest, AnswersTheSameVersionAtTheDeadline) {
  const auto [body, took] = poll("known_version=1&wait_ms=300");
  EXPECT_EQ(body["version"], 1);
  EXPECT_EQ(body["job_id"], 42);
  EXPECT_GE(took, std::chrono::milliseconds(300));
  EXPECT_LT(took, std::chrono::seconds(10));
}

TEST_F(LongPollTest, ManyWaitersOfOneJobAreAllWoken) {
  std::vector<std::future<std::pair<nlohmann::json, Clock::duration>>> waiters;
  for (int i = 0; i < 4; ++i) {
    waiters.push_back(
        std::async(std::launch::async, [this] { return poll("known_version=1&wait_ms=20000"); }));
  }
  TestClient client = connect();
  ASSERT_EQ(
      client.send_json(verb::put, "/v1/budget", R"({"traffic_budget":0.5})", bearer()).result(),
      status::ok);
  ASSERT_EQ(client
                .send_json(verb::put, "/v1/policy", R"({"policy":"static","default_codec":"bf16"})",
                           bearer())
                .result(),
            status::ok);
  for (auto& waiter : waiters) {
    const auto [body, took] = waiter.get();
    EXPECT_GE(body["version"], 2);
    EXPECT_LT(took, std::chrono::seconds(10));
  }
}

}  // namespace
}  // namespace gradgate::control::testing
