// A real Prometheus server (Debian's `prometheus`) scrapes the gateways' and the controller's
// /metrics while worker processes all-reduce through the gateways; its HTTP query API shows the
// traffic, ratio and report series move.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "controller_process.h"
#include "job.h"
#include "prometheus_server.h"

namespace gradgate::gateway::testing {
namespace {

using std::chrono::milliseconds;

const std::vector<TensorArg> kTensors = {{"fc.weight", 100000}, {"fc.bias", 100}};

void run_workers(bench::LocalJob& job, int steps, uint64_t seed, const std::string& name) {
  auto w0 = start_worker(job, 0, 0, kTensors, steps, seed, job.dir() + "/" + name + "0");
  auto w1 = start_worker(job, 1, 0, kTensors, steps, seed, job.dir() + "/" + name + "1");
  ASSERT_EQ(w0->wait_exit(milliseconds(60000)), 0) << w0->log();
  ASSERT_EQ(w1->wait_exit(milliseconds(60000)), 0) << w1->log();
}

TEST(Prometheus, ScrapesGatewaysAndControllerAndSeesTrafficAndRatioMove) {
  ASSERT_TRUE(std::filesystem::exists(PrometheusServer::kBinary))
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
