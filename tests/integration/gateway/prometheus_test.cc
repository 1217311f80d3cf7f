// A real Prometheus server (Debian's `prometheus`) scrapes the gateways' and the controller's
// /metrics while worker processes all-reduce through the gateways; its HTTP query API shows the
// traffic, ratio and report series move.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "common/http/client.h"
#include "controller_process.h"
#include "job.h"

namespace gradgate::gateway::testing {
namespace {

using std::chrono::milliseconds;

const std::vector<TensorArg> kTensors = {{"fc.weight", 100000}, {"fc.bias", 100}};

// A TCP port that was free a moment ago (Prometheus cannot report a port 0 it bound).
uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

class PrometheusServer {
 public:
  PrometheusServer(const std::string& dir, const std::vector<uint16_t>& targets) {
    port_ = free_port();
    std::ofstream config(dir + "/prometheus.yml");
    config << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
           << "scrape_configs:\n  - job_name: gradgate\n    static_configs:\n      - targets: [";
    for (size_t i = 0; i < targets.size(); ++i) {
      config << (i ? ", " : "") << "\"127.0.0.1:" << targets[i] << "\"";
    }
    config << "]\n";
    config.close();
    process_ = std::make_unique<bench::ChildProcess>(
        "/usr/bin/prometheus",
        std::vector<std::string>{"--config.file=" + dir + "/prometheus.yml",
                                 "--storage.tsdb.path=" + dir + "/tsdb",
                                 "--web.listen-address=127.0.0.1:" + std::to_string(port_)},
        dir + "/prometheus.log");
  }
  ~PrometheusServer() {
    process_->signal(SIGTERM);
    process_->wait_exit(milliseconds(10000));
  }

  /// The value of a query that yields one sample, or nothing (yet).
  std::optional<double> query(const std::string& promql) const {
    http::ClientOptions options;
    options.port = port_;
    std::string encoded;
    for (const char c : promql) {
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
        encoded += c;
      } else {
        char hex[4];
        std::snprintf(hex, sizeof(hex), "%%%02X", static_cast<unsigned char>(c));
        encoded += hex;
      }
    }
    auto answer = http::send_request(options, http::verb::get, "/api/v1/query?query=" + encoded);
    if (!answer.ok() || answer->status != 200) return std::nullopt;
    const auto body = nlohmann::json::parse(answer->body, nullptr, false);
    if (body.is_discarded() || body.value("status", "") != "success") return std::nullopt;
    const auto& result = body["data"]["result"];
    if (!result.is_array() || result.size() != 1) return std::nullopt;
    return std::stod(result[0]["value"][1].get<std::string>());
  }

  /// Waits (bounded, 30 s) until `promql` has a value that `accept` takes; returns it.
  std::optional<double> wait_for(const std::string& promql,
                                 const std::function<bool(double)>& accept) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      if (auto value = query(promql); value && accept(*value)) return value;
      std::this_thread::sleep_for(milliseconds(200));  // Prometheus scrapes on its own clock
    }
    return std::nullopt;
  }

  std::string log() const { return process_->log(); }

 private:
  uint16_t port_ = 0;
  std::unique_ptr<bench::ChildProcess> process_;
};

void run_workers(bench::LocalJob& job, int steps, uint64_t seed, const std::string& name) {
  auto w0 = start_worker(job, 0, 0, kTensors, steps, seed, job.dir() + "/" + name + "0");
  auto w1 = start_worker(job, 1, 0, kTensors, steps, seed, job.dir() + "/" + name + "1");
  ASSERT_EQ(w0->wait_exit(milliseconds(60000)), 0) << w0->log();
  ASSERT_EQ(w1->wait_exit(milliseconds(60000)), 0) << w1->log();
}

TEST(Prometheus, ScrapesGatewaysAndControllerAndSeesTrafficAndRatioMove) {
  ASSERT_TRUE(std::filesystem::exists("/usr/bin/prometheus"))
      << "Debian's prometheus package is needed (./gradgate.sh installs it)";
  ControllerProcess controller;
  controller.start("topk:density=0.01");
  auto options = job_options(2, 1, "topk:density=0.01");
  options.report_interval_ms = 200;
  options.control_url = controller.url();
  bench::LocalJob job(options);
  PrometheusServer prometheus(job.dir(), {job.admin_port(0), job.admin_port(1), controller.port()});
  ASSERT_TRUE(prometheus.wait_for("count(up{job=\"gradgate\"} == 1)", [](double v) {
    return v == 3;
  })) << prometheus.log();
  ASSERT_TRUE(prometheus.wait_for("count(gradgate_build_info)", [](double v) { return v == 3; }));
  const std::string reports = "sum(gradgate_controller_reports_total)";
  const auto reports_before = prometheus.wait_for(reports, [](double v) { return v > 0; });
  ASSERT_TRUE(reports_before) << "the controller's report counter must reach Prometheus";

  run_workers(job, 10, 1, "a");
  const std::string raw = "sum(gradgate_raw_bytes_total{codec=\"topk\"})";
  constexpr double kRawOf10Steps = 2 * 10 * 100000.0 * 4;  // both gateways, fc.weight
  const auto first = prometheus.wait_for(raw, [](double v) { return v == kRawOf10Steps; });
  ASSERT_TRUE(first) << "last value " << prometheus.query(raw).value_or(-1) << "\n"
                     << prometheus.log();
  const auto wire = prometheus.wait_for("sum(gradgate_wire_bytes_total{codec=\"topk\"})",
                                        [](double v) { return v > 0; });
  ASSERT_TRUE(wire);
  EXPECT_LT(*wire, *first * 0.05);
  const auto ratio =
      prometheus.wait_for("min(gradgate_compression_ratio)", [](double v) { return v > 1.0; });
  ASSERT_TRUE(ratio) << "the achieved ratio must reach Prometheus";
  EXPECT_GT(*ratio, 10.0);

  // More all-reduces: the series move on.
  run_workers(job, 10, 2, "b");
  const auto second = prometheus.wait_for(raw, [&](double v) { return v == 2 * kRawOf10Steps; });
  ASSERT_TRUE(second) << "raw bytes did not move after more all-reduces: "
                      << prometheus.query(raw).value_or(-1);
  EXPECT_TRUE(prometheus.wait_for("sum(gradgate_allreduces_total)",
                                  [](double v) { return v == 2 * 2 * 2 * 10; }));
  EXPECT_TRUE(prometheus.wait_for(reports, [&](double v) { return v > *reports_before; }))
      << "the controller's series must move as the gateways report";
}

}  // namespace
}  // namespace gradgate::gateway::testing
