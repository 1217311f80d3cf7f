// Helpers for the controller tests: a controller served in-process on 127.0.0.1 and a
// system-picked port, with a bearer token in a temporary file; report bodies; the HTTP client and
// problem+json checks of the HTTP tests.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "control/config/control_config.h"
#include "control/server/control_server.h"
#include "http_test_support.h"

namespace gradgate::control::testing {

using http::status;
using http::verb;
namespace beast_http = boost::beast::http;
using http::testing::closed_without_answer;
using http::testing::expect_problem;
using http::testing::Headers;
using http::testing::Reply;
using http::testing::TestClient;

inline constexpr std::string_view kToken = "s3cret-token";

/// A temporary directory, removed with its contents at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "gradgate-control-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::filesystem::path path() const { return path_; }
  /// Writes `text` to `name` in the directory and returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    const auto file = path_ / name;
    std::ofstream(file) << text;
    return file.string();
  }

 private:
  std::filesystem::path path_;
};

/// A configuration for tests: any free port, small limits, versions made without delay.
inline ControlConfig test_config() {
  ControlConfig config;
  config.listen_port = 0;
  config.max_body_bytes = 64 * 1024;
  config.request_timeout = std::chrono::seconds(5);
  config.min_interval = std::chrono::milliseconds(0);
  config.log_level = "warn";
  return config;
}

inline Headers bearer(std::string_view token = kToken) {
  return {{beast_http::field::authorization, "Bearer " + std::string(token)}};
}

/// A report of node `node` of a job of `nodes`, at `step`, without measurements.
inline nlohmann::json report(uint64_t job_id, uint32_t node, uint32_t nodes, uint64_t step = 0) {
  return {{"job_id", job_id},
          {"node", node},
          {"nodes", nodes},
          {"address", "127.0.0.1:" + std::to_string(4000 + node)},
          {"admin", "127.0.0.1:" + std::to_string(9100 + node)},
          {"step", step},
          {"policy_version", 0},
          {"fail_static", false}};
}

inline nlohmann::json body_of(const Reply& reply) {
  return nlohmann::json::parse(reply.body(), nullptr, false);
}

/// A controller served in-process with test_config() and the token kToken (in a file).
class ControlFixture : public ::testing::Test {
 protected:
  void start(ControlConfig config = test_config()) {
    config.token_file = dir_.write("token", std::string(kToken) + "\n");
    auto made = ControlServer::make(config);
    ASSERT_TRUE(made.ok()) << made.status().to_string();
    server_ = std::move(*made);
    const Status started = server_->start();
    ASSERT_TRUE(started.ok()) << started.to_string();
  }

  TestClient connect() const { return TestClient(server_->port()); }

  /// POSTs a report with the token; the reply must be 200.
  nlohmann::json post_report(TestClient& client, const nlohmann::json& body) {
    const Reply reply = client.send_json(verb::post, "/v1/nodes", body.dump(), bearer());
    EXPECT_EQ(reply.result(), status::ok) << reply.body();
    return body_of(reply);
  }

  nlohmann::json get(TestClient& client, const std::string& target) {
    const Reply reply = client.send(verb::get, target);
    EXPECT_EQ(reply.result(), status::ok) << target << ": " << reply.body();
    return body_of(reply);
  }

  TempDir dir_;
  std::unique_ptr<ControlServer> server_;
};

}  // namespace gradgate::control::testing
