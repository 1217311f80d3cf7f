// `gradgate control -c FILE` as users run it: the binary of this build with a temporary config,
// found through its ready file; SIGTERM stops it cleanly; a bad config stops it at start, and
// `gradgate validate --control` says the same without starting it; settings set through the API
// outlive a restart in policy.settings_file, which gradgate validate --control checks too.
#include <signal.h>

#include <filesystem>
#include <memory>
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

// Settings set through the API and kept in policy.settings_file outlive a crash: the restarted
// controller decides with them, not with its file's policy section. A file that does not hold
// settings stops the start, naming it.
TEST(ControlProcessTest, SettingsSetThroughTheApiOutliveARestart) {
  TempDir dir;
  const std::string token = dir.write("token", std::string(kToken));
  const std::string settings = (dir.path() / "settings.json").string();
  const std::string config = dir.write("control.yaml", R"(
server: {listen: "127.0.0.1:0"}
auth: {token_file: ")" + token + R"("}
policy: {policy: bandwidth, settings_file: ")" + settings + R"("}
)");
  const std::string ready = (dir.path() / "ready.json").string();
  const auto start = [&](const std::string& log) {
    std::filesystem::remove(ready);
    auto process = std::make_unique<ChildProcess>(
        GRADGATE_BINARY, std::vector<std::string>{"control", "-c", config, "--ready-file", ready},
        (dir.path() / log).string());
    const auto port = bench::wait_for_ready_file(ready, *process, std::chrono::seconds(20))
                          .at("port")
                          .get<uint16_t>();
    return std::make_pair(std::move(process), port);
  };

  auto [first, first_port] = start("first.log");
  TestClient client(first_port);
  const Reply put = client.send_json(verb::put, "/v1/policy",
                                     R"({"policy":"static","default_codec":"fp16"})", bearer());
  ASSERT_EQ(put.result(), status::ok) << put.body();
  ASSERT_EQ(
      client.send_json(verb::put, "/v1/budget", R"({"traffic_budget":0.05})", bearer()).result(),
      status::ok);
  first->signal(SIGKILL);
  first->wait_exit(std::chrono::seconds(10));

  auto [second, second_port] = start("second.log");
  const nlohmann::json after = body_of(TestClient(second_port).send(verb::get, "/v1/policy"));
  EXPECT_EQ(after["policy"], "static") << after;
  EXPECT_EQ(after["default_codec"], "fp16") << after;
  EXPECT_DOUBLE_EQ(after["traffic_budget"].get<double>(), 0.05) << after;
  EXPECT_NE(second->log().find("policy settings from " + settings), std::string::npos)
      << second->log();
  second->signal(SIGTERM);
  EXPECT_EQ(second->wait_exit(std::chrono::seconds(10)), 0) << second->log();

  dir.write("settings.json", R"({"policy":"static","default_codec":"zip"})");
  ChildProcess refused(GRADGATE_BINARY, {"control", "-c", config},
                       (dir.path() / "refused.log").string());
  EXPECT_EQ(refused.wait_exit(std::chrono::seconds(10)), 1);
  EXPECT_NE(refused.log().find(settings + ": "), std::string::npos) << refused.log();
  ChildProcess validated(GRADGATE_BINARY, {"validate", "--control", "-c", config},
                         (dir.path() / "validate.log").string());
  EXPECT_EQ(validated.wait_exit(std::chrono::seconds(10)), 1);
  EXPECT_NE(validated.log().find(settings + ": "), std::string::npos) << validated.log();
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
