// `gradgate control -c FILE` as users run it: the binary of this build with a temporary config,
// found through its ready file; SIGTERM stops it cleanly; a bad config stops it at start, and
// `gradgate validate --control` says the same without starting it.
#include <signal.h>

#include <thread>

#include "api_cases.h"
#include "child_process.h"

namespace gradgate::control::testing {
namespace {

using bench::ChildProcess;

TEST(ControlProcessTest, ServesFromItsConfigAndStopsOnSigterm) {
  TempDir dir;
  const std::string token = dir.write("token", std::string(kToken));
  const std::string config = dir.write("control.yaml", R"(
server: {listen: "127.0.0.1:0"}
auth: {token_file: ")" + token + R"("}
log: {level: info, format: json}
)");
  const std::string ready = (dir.path() / "ready.json").string();
  ChildProcess process(GRADGATE_BINARY,
                       {"control", "-c", config, "--ready-file", ready, "--set",
                        "nodes.report_interval_ms=250", "--set", "policy.policy=bandwidth"},
                       (dir.path() / "control.log").string());
  const auto port = bench::wait_for_ready_file(ready, process, std::chrono::seconds(20))
                        .at("port")
                        .get<uint16_t>();
  ASSERT_NE(port, 0) << process.log();

  TestClient client(port);
  EXPECT_EQ(client.send(verb::get, "/livez").result(), status::ok);
  EXPECT_EQ(client.send(verb::get, "/readyz").result(), status::ok);
  expect_problem(client.send_json(verb::post, "/v1/nodes", report(1, 0, 1).dump()),
                 status::unauthorized, "Authorization");
  const Reply reported =
      client.send_json(verb::post, "/v1/nodes", report(1, 0, 1).dump(), bearer());
  ASSERT_EQ(reported.result(), status::ok) << reported.body();
  EXPECT_EQ(body_of(reported)["report_interval_ms"], 250);
  EXPECT_EQ(body_of(client.send(verb::get, "/v1/policy"))["policy"], "bandwidth");
  EXPECT_NE(client.send(verb::get, "/metrics").body().find("gradgate_controller_reports_total 1"),
            std::string::npos);

  process.signal(SIGTERM);
  EXPECT_EQ(process.wait_exit(std::chrono::seconds(10)), 0) << process.log();
  EXPECT_NE(process.log().find(R"("component":"controller")"), std::string::npos);
}

TEST(ControlProcessTest, BadConfigFailsAtStartNamingTheKey) {
  TempDir dir;
  const std::string config = dir.write("control.yaml", "nodes: {stale_after_ms: soon}\n");
  ChildProcess process(GRADGATE_BINARY, {"control", "-c", config},
                       (dir.path() / "control.log").string());
  EXPECT_EQ(process.wait_exit(std::chrono::seconds(10)), 1);
  EXPECT_NE(process.log().find("nodes.stale_after_ms"), std::string::npos) << process.log();
}

TEST(ControlProcessTest, ValidateControlChecksAControllerFileWithoutStartingIt) {
  TempDir dir;
  const std::string good = dir.write("good.yaml", "server: {listen: \"127.0.0.1:0\"}\n");
  const std::string bad = dir.write("bad.yaml", "nodes: {stale_after_ms: soon}\n");
  const auto run = [&](std::vector<std::string> args, const std::string& log) {
    ChildProcess process(GRADGATE_BINARY, std::move(args), (dir.path() / log).string());
    const int code = process.wait_exit(std::chrono::seconds(10));
    return std::make_pair(code, process.log());
  };
  const auto [ok_code, ok_log] = run({"validate", "--control", "-c", good}, "good.log");
  EXPECT_EQ(ok_code, 0) << ok_log;
  EXPECT_NE(ok_log.find(good + ": ok"), std::string::npos) << ok_log;

  const auto [bad_code, bad_log] = run({"validate", "--control", "-c", bad}, "bad.log");
  EXPECT_EQ(bad_code, 1);
  EXPECT_NE(bad_log.find("nodes.stale_after_ms"), std::string::npos) << bad_log;

  // Checked as a gateway file, a valid controller file fails and the error says what it is.
  const auto [gateway_code, gateway_log] = run({"validate", "-c", good}, "gateway.log");
  EXPECT_EQ(gateway_code, 1);
  EXPECT_NE(gateway_log.find("is a controller configuration, and a valid one"), std::string::npos)
      << gateway_log;
}

}  // namespace
}  // namespace gradgate::control::testing
