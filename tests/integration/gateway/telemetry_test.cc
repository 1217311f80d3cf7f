// What a running gateway shows: its admin API and Prometheus metrics, read over real HTTP from
// gateway processes while worker processes all-reduce through them.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <tuple>

#include "common/http/client.h"
#include "gradgate/client.h"
#include "gradgate/config.h"
#include "http_test_support.h"
#include "job.h"

namespace gradgate::gateway::testing {
namespace {

using std::chrono::milliseconds;

const std::vector<TensorArg> kTensors = {{"conv.weight", 40000}, {"conv.bias", 64}};

Result<http::ClientResponse> get(uint16_t port, const std::string& target) {
  http::ClientOptions options;
  options.port = port;
  return http::send_request(options, http::verb::get, target);
}

// Reads /metrics until `done` holds for it (bounded: 20 s), and returns the last exposition.
std::string metrics_once(uint16_t port, const std::function<bool(const std::string&)>& done) {
  std::string last;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    auto answer = get(port, "/metrics");
    if (answer.ok() && answer->status == 200) {
      last = answer->body;
      if (done(last)) break;
    }
    std::this_thread::sleep_for(milliseconds(50));  // polling a process we do not control
  }
  return last;
}

TEST(GatewayTelemetry, MetricsAndStatusFollowTheAllreduces) {
  bench::LocalJob job(job_options(2, 1, "topk:density=0.01"));
  constexpr int kSteps = 5;
  auto w0 = start_worker(job, 0, 0, kTensors, kSteps, 1, job.dir() + "/o0");
  auto w1 = start_worker(job, 1, 0, kTensors, kSteps, 1, job.dir() + "/o1");
  ASSERT_EQ(w0->wait_exit(milliseconds(60000)), 0) << w0->log();
  ASSERT_EQ(w1->wait_exit(milliseconds(60000)), 0) << w1->log();

  // conv.weight goes through topk, conv.bias (under min_compress_elements) through none.
  const std::string text = metrics_once(job.admin_port(0), [&](const std::string& m) {
    return sample(m, "gradgate_allreduces_total{codec=\"topk\"}") == kSteps &&
           sample(m, "gradgate_allreduces_total{codec=\"none\"}") == kSteps;
  });
  EXPECT_EQ(sample(text, "gradgate_allreduces_total{codec=\"topk\"}"), kSteps) << text;
  const double raw = sample(text, "gradgate_raw_bytes_total{codec=\"topk\"}");
  const double wire = sample(text, "gradgate_wire_bytes_total{codec=\"topk\"}");
  EXPECT_EQ(raw, kSteps * 40000.0 * 4);
  EXPECT_GT(wire, 0.0);
  EXPECT_LT(wire, raw * 0.05) << "topk at 1% sends a few percent of the raw bytes";
  EXPECT_EQ(sample(text, "gradgate_encode_seconds_count{codec=\"topk\",device=\"cpu\"}"), kSteps);
  // Host buffers: no tensor in GPU memory on either side, and nothing probed.
  EXPECT_EQ(sample(text, "gradgate_gpu_tensors{placement=\"gpu\"}"), 0.0) << text;
  EXPECT_EQ(sample(text, "gradgate_gpu_tensors{placement=\"cpu\"}"), 0.0) << text;
  EXPECT_EQ(text.find("gradgate_placement_probe_elements_per_second{"), std::string::npos);
  EXPECT_EQ(sample(text, "gradgate_build_info{component=\"gateway\",transports=\"" +
                             std::string(GRADGATE_TRANSPORTS) + "\",version=\"" +
                             std::string(GRADGATE_VERSION) + "\"}"),
            1.0);

  auto status = get(job.admin_port(0), "/v1/status");
  ASSERT_TRUE(status.ok()) << status.status().to_string();
  ASSERT_EQ(status->status, 200u);
  const auto body = nlohmann::json::parse(status->body);
  EXPECT_EQ(body.at("node"), 0);
  EXPECT_EQ(body.at("nodes"), 2);
  EXPECT_EQ(body.at("peers_up"), nlohmann::json::array({1}));
  EXPECT_EQ(body.at("allreduces"), 2 * kSteps);
  EXPECT_EQ(body.at("fail_static"), false);

  for (const char* probe : {"/livez", "/readyz"}) {
    auto answer = get(job.admin_port(1), probe);
    ASSERT_TRUE(answer.ok());
    EXPECT_EQ(answer->status, 200u) << probe;
  }
  // Gauges follow within a refresh interval; the workers are gone, and so are their tensors.
  const std::string gauges = metrics_once(job.admin_port(1), [](const std::string& m) {
    return sample(m, "gradgate_peers_up") == 1.0 && sample(m, "gradgate_local_workers") == 0.0;
  });
  EXPECT_EQ(sample(gauges, "gradgate_peers_up"), 1.0);
  EXPECT_EQ(sample(gauges, "gradgate_tensors"), 0.0);
  EXPECT_EQ(sample(gauges, "gradgate_residual_memory_bytes"), 0.0);
  // Every response of the admin API is counted, by route and status.
  for (const char* probe : {"/livez", "/readyz"}) {
    EXPECT_EQ(sample(gauges, std::string(R"(gradgate_http_requests_total{code="200",route=")") +
                                 probe + "\"}"),
              1.0)
        << probe << "\n"
        << gauges;
  }
}

// gradgate_local_wait_seconds shows a straggler: one of a node's two workers asks 300 ms after the
// other at every step.
TEST(GatewayTelemetry, LocalWaitShowsAStragglingWorker) {
  bench::LocalJob job(job_options(1, 2, "none"));
  constexpr int kSteps = 3;
  const std::vector<TensorArg> tensors = {{"w", 1000}};
  auto prompt = start_worker(job, 0, 0, tensors, kSteps, 1, job.dir() + "/o0");
  auto straggler =
      start_worker(job, 0, 1, tensors, kSteps, 1, job.dir() + "/o1", {"--delay-ms", "300"});
  ASSERT_EQ(prompt->wait_exit(milliseconds(60000)), 0) << prompt->log();
  ASSERT_EQ(straggler->wait_exit(milliseconds(60000)), 0) << straggler->log();
  const std::string text = metrics_once(job.admin_port(0), [](const std::string& m) {
    return sample(m, "gradgate_local_wait_seconds_count") == kSteps;
  });
  EXPECT_EQ(sample(text, "gradgate_local_wait_seconds_count"), kSteps) << text;
  // The prompt worker asks at once, the straggler 300 ms later, less what the prompt worker spends
  // between two steps (a few milliseconds).
  EXPECT_GE(sample(text, "gradgate_local_wait_seconds_sum"), kSteps * 0.25) << text;
}

// gradgate_peer_up follows each peer's connection: 1 while it is up, 0 once it went down.
TEST(GatewayTelemetry, PeerUpFollowsEachPeersConnection) {
  bench::LocalJob job(job_options(3, 1, "none"));
  const std::string up = metrics_once(job.admin_port(0), [](const std::string& m) {
    return sample(m, "gradgate_peer_up{peer=\"1\"}") == 1.0 &&
           sample(m, "gradgate_peer_up{peer=\"2\"}") == 1.0;
  });
  EXPECT_EQ(sample(up, "gradgate_peer_up{peer=\"1\"}"), 1.0) << up;
  EXPECT_EQ(sample(up, "gradgate_peer_up{peer=\"2\"}"), 1.0) << up;
  EXPECT_EQ(up.find("gradgate_peer_up{peer=\"0\"}"), std::string::npos) << "not itself";
  ASSERT_EQ(job.stop_gateway(2), 0);
  const std::string down = metrics_once(job.admin_port(0), [](const std::string& m) {
    return sample(m, "gradgate_peer_up{peer=\"2\"}") == 0.0;
  });
  EXPECT_EQ(sample(down, "gradgate_peer_up{peer=\"2\"}"), 0.0) << down;
  EXPECT_EQ(sample(down, "gradgate_peer_up{peer=\"1\"}"), 1.0) << down;
}

// admin.max_connections reaches the admin API: with one slot, a second connection takes the slot
// of the first (idle after its answer), which is closed.
TEST(GatewayTelemetry, AdminMaxConnectionsBoundsTheConnections) {
  auto options = job_options(1, 1, "none");
  options.settings.push_back("admin.max_connections=1");
  bench::LocalJob job(options);
  http::testing::TestClient first(job.admin_port(0));
  ASSERT_EQ(first.send(http::verb::get, "/livez").result(), http::status::ok);
  http::testing::TestClient second(job.admin_port(0));
  EXPECT_EQ(second.send(http::verb::get, "/livez").result(), http::status::ok);
  http::testing::Reply none;
  EXPECT_TRUE(http::testing::closed_without_answer(first.read(none)));
}

// A worker that sends what is not the ingress protocol is counted where Grafana sees errors.
TEST(GatewayTelemetry, AMalformedMessageFromAWorkerIsCounted) {
  bench::LocalJob job(job_options(1, 1, "none"));
  const int worker = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  ASSERT_GE(worker, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string path = job.socket(0);
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  ASSERT_EQ(connect(worker, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  const std::vector<char> garbage(40, 0x5a);
  ASSERT_EQ(send(worker, garbage.data(), garbage.size(), 0), 40);
  close(worker);
  const std::string series = "gradgate_errors_total{kind=\"worker_protocol_error\"}";
  const std::string text =
      metrics_once(job.admin_port(0), [&](const std::string& m) { return sample(m, series) == 1; });
  EXPECT_EQ(sample(text, series), 1.0) << text;
  EXPECT_EQ(sample(text, "gradgate_errors_total{kind=\"refused_connection\"}"), 0.0) << text;
}

// A worker that the gateway cannot take (its rank beyond job.local_workers) is counted too.
TEST(GatewayTelemetry, ARefusedWorkerIsCounted) {
  bench::LocalJob job(job_options(1, 1, "none"));
  gg_client* client = nullptr;
  ASSERT_EQ(gg_connect(job.socket(0).c_str(), 3, &client), GG_REJECTED) << gg_last_error();
  const std::string series = "gradgate_errors_total{kind=\"refused_worker\"}";
  const std::string text =
      metrics_once(job.admin_port(0), [&](const std::string& m) { return sample(m, series) == 1; });
  EXPECT_EQ(sample(text, series), 1.0) << text;
  EXPECT_EQ(sample(text, "gradgate_errors_total{kind=\"worker_protocol_error\"}"), 0.0) << text;
}

// A declaration the gateway refuses (here: over its residual memory cap) fails the worker's
// call, and the gateway logs and counts it: the platform's side sees it too.
TEST(GatewayTelemetry, ARefusedDeclarationIsLoggedAndCounted) {
  auto options = job_options(2, 1, "topk:density=0.01");
  options.residual_memory_cap_bytes = 4096;  // less than the residual of 10,000 fp32 elements
  bench::LocalJob job(options);
  gg_client* client = nullptr;
  ASSERT_EQ(gg_connect(job.socket(0).c_str(), 0, &client), GG_OK) << gg_last_error();
  gg_tensor* tensor = nullptr;
  EXPECT_EQ(gg_declare(client, "big", 10000, GG_FP32, 0, 0, 0.0, &tensor), GG_RESOURCE_EXHAUSTED);
  EXPECT_NE(std::string(gg_last_error()).find("residual_memory_cap_bytes"), std::string::npos)
      << gg_last_error();
  const std::string series = "gradgate_errors_total{kind=\"refused_declaration\"}";
  const std::string text =
      metrics_once(job.admin_port(0), [&](const std::string& m) { return sample(m, series) == 1; });
  EXPECT_EQ(sample(text, series), 1.0) << text;
  EXPECT_TRUE(wait_for_log(job.gateway(0), "DECLARE \"big\" refused", milliseconds(5000)))
      << job.gateway(0).log();
  ASSERT_EQ(gg_close(client), GG_OK);
}

TEST(GatewayTelemetry, AnUnreachableControllerIsFailStaticAndAllreducesGoOn) {
  auto options = job_options(2, 1, "topk:density=0.01");
  options.control_url = "127.0.0.1:1";  // nothing listens there
  options.report_interval_ms = 100;
  bench::LocalJob job(options);
  auto w0 = start_worker(job, 0, 0, kTensors, 3, 2, job.dir() + "/o0");
  auto w1 = start_worker(job, 1, 0, kTensors, 3, 2, job.dir() + "/o1");
  EXPECT_EQ(w0->wait_exit(milliseconds(60000)), 0) << w0->log();
  EXPECT_EQ(w1->wait_exit(milliseconds(60000)), 0) << w1->log();
  const std::string text = metrics_once(job.admin_port(0), [](const std::string& m) {
    return sample(m, "gradgate_fail_static") == 1.0;
  });
  EXPECT_EQ(sample(text, "gradgate_fail_static"), 1.0);
  EXPECT_TRUE(wait_for_log(job.gateway(0), "fail-static", milliseconds(5000)));
}

// The gateway's admin API against docs/openapi.yaml: every (path, method, status) documented for
// the gateway is answered by a real gateway process, and it answers nothing undocumented.
TEST(GatewayTelemetry, AdminApiMatchesTheOpenApiDocument) {
  auto options = job_options(2, 1, "none");
  options.started = 1;  // gateway 1 comes later: gateway 0 is not ready until then
  bench::LocalJob job(options);
  std::set<std::tuple<std::string, std::string, unsigned>> seen;
  auto call = [&](const std::string& path) {
    auto answer = get(job.admin_port(0), path);
    EXPECT_TRUE(answer.ok()) << path;
    if (!answer.ok()) return 0u;
    seen.insert({path, "get", answer->status});
    return answer->status;
  };
  EXPECT_EQ(call("/readyz"), 503u);
  job.start_gateway(1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (call("/readyz") != 200 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));  // until gateway 1 has connected
  }
  for (const char* path : {"/livez", "/metrics", "/v1/status"}) EXPECT_EQ(call(path), 200u);

  std::set<std::tuple<std::string, std::string, unsigned>> documented;
  const YAML::Node document =
      YAML::LoadFile(std::string(GRADGATE_SOURCE_DIR) + "/docs/openapi.yaml");
  for (const auto& path : document["paths"]) {
    for (const auto& operation : path.second) {
      bool for_gateway = false;
      for (const auto& tag : operation.second["tags"])
        for_gateway |= tag.as<std::string>() == "gateway";
      if (!for_gateway) continue;
      for (const auto& response : operation.second["responses"]) {
        const auto component = response.second["x-gradgate-component"];
        if (component && component.as<std::string>() != "gateway") continue;
        documented.insert({path.first.as<std::string>(), operation.first.as<std::string>(),
                           response.first.as<unsigned>()});
      }
    }
  }
  EXPECT_EQ(seen, documented);
}

}  // namespace
}  // namespace gradgate::gateway::testing
