// /metrics, /livez and /readyz over real HTTP.
#include <prometheus/counter.h>
#include <atomic>

#include "common/http/health.h"
#include "common/metrics/metrics.h"
#include "gradgate/config.h"
#include "http_test_support.h"

namespace gradgate::http::testing {
namespace {

class MetricsTest : public ServerFixture {
 protected:
  void SetUp() override {
    registry_ = metrics::make_registry("test");
    requests_ = &prometheus::BuildCounter()
                     .Name("gradgate_test_requests_total")
                     .Help("Requests counted by the test")
                     .Register(*registry_)
                     .Add({});
    start_server({}, [this](HttpServer& server) {
      metrics::serve_metrics(server, registry_);
      serve_health(server, [this] {
        return ready_ ? Status::ok_status()
                      : Status(ErrorCode::kUnavailable, "no policy from the controller yet");
      });
    });
  }

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Counter* requests_ = nullptr;
  std::atomic<bool> ready_{false};
};

TEST_F(MetricsTest, ServesBuildInfoAndCountersInTextFormat) {
  requests_->Increment(3);
  TestClient client = connect();
  const Reply reply = client.send(verb::get, "/metrics");
  ASSERT_EQ(reply.result(), status::ok);
  EXPECT_EQ(reply[beast_http::field::content_type], metrics::kTextFormatContentType);
  EXPECT_NE(reply.body().find("# TYPE gradgate_build_info gauge"), std::string::npos);
  EXPECT_NE(reply.body().find(std::string(R"(gradgate_build_info{component="test",transports=")") +
                              GRADGATE_TRANSPORTS + R"(",version=")" + GRADGATE_VERSION + "\"} 1"),
            std::string::npos)
      << reply.body();
  EXPECT_NE(reply.body().find("gradgate_test_requests_total 3"), std::string::npos) << reply.body();

  requests_->Increment();
  EXPECT_NE(client.send(verb::get, "/metrics").body().find("gradgate_test_requests_total 4"),
            std::string::npos);
}

TEST_F(MetricsTest, MetricsIsReadOnly) {
  const Reply reply = connect().send(verb::post, "/metrics");
  expect_problem(reply, status::method_not_allowed);
  EXPECT_EQ(reply[beast_http::field::allow], "GET, HEAD");
}

TEST_F(MetricsTest, LivezIsAlwaysOk) {
  const Reply reply = connect().send(verb::get, "/livez");
  EXPECT_EQ(reply.result(), status::ok);
  EXPECT_EQ(nlohmann::json::parse(reply.body()), nlohmann::json({{"status", "ok"}}));
}

TEST_F(MetricsTest, ReadyzFollowsTheReadinessCheck) {
  TestClient client = connect();
  expect_problem(client.send(verb::get, "/readyz"), status::service_unavailable, {},
                 "no policy from the controller yet");
  ready_ = true;
  const Reply ready = client.send(verb::get, "/readyz");
  EXPECT_EQ(ready.result(), status::ok);
  EXPECT_EQ(nlohmann::json::parse(ready.body()), nlohmann::json({{"status", "ok"}}));
}

TEST(ResponseCounterTest, CountsResponsesByRoutePatternAndCode) {
  auto registry = metrics::make_registry("test");
  ServerOptions options;
  options.on_response = metrics::count_responses(registry, "gradgate_test_http_requests_total");
  HttpServer server(std::move(options));
  metrics::serve_metrics(server, registry);
  server.add_route(verb::get, "/v1/jobs/{id}", [](const Request&) { return json_response({}); });
  ASSERT_TRUE(server.start().ok());
  TestClient client(server.port());
  ASSERT_EQ(client.send(verb::get, "/metrics").result(), status::ok);
  ASSERT_EQ(client.send(verb::get, "/v1/jobs/1").result(), status::ok);
  ASSERT_EQ(client.send(verb::get, "/v1/jobs/2").result(), status::ok);
  ASSERT_EQ(client.send(verb::get, "/nowhere").result(), status::not_found);

  const std::string text = client.send(verb::get, "/metrics").body();
  for (const char* series :
       {R"(gradgate_test_http_requests_total{code="200",route="/metrics"} 1)",
        R"(gradgate_test_http_requests_total{code="200",route="/v1/jobs/{id}"} 2)",
        R"(gradgate_test_http_requests_total{code="404",route="unmatched"} 1)"}) {
    EXPECT_NE(text.find(series), std::string::npos) << series << "\n" << text;
  }
}

TEST(HealthTest, WithoutReadinessCheckAlwaysReady) {
  HttpServer server({});
  serve_health(server, {});
  ASSERT_TRUE(server.start().ok());
  EXPECT_EQ(TestClient(server.port()).send(verb::get, "/readyz").result(), status::ok);
}

}  // namespace
}  // namespace gradgate::http::testing
