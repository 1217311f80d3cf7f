// load_gateway_config: reading a file from disk and the process environment.
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "config_test_support.h"

namespace gradgate::gateway {
namespace {

using ::testing::ElementsAre;
using testing::error_lines;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A fresh directory for one test, removed with everything in it afterwards.
class LoadConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "gradgate-config-XXXXXX");
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::string write(const std::string& name, const std::string& text) {
    const auto path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  std::filesystem::path dir_;
};

// Sets an environment variable for the lifetime of the guard.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

TEST_F(LoadConfig, ReadsTheFileAndAppliesSetOverrides) {
  const auto path = write("gateway.yaml", "job:\n  nodes: [\"127.0.0.1:29500\"]\n  id: 9\n");
  const auto config = load_gateway_config(path, {"job.id=10"});
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->job_id, 10u);
}

TEST_F(LoadConfig, ErrorsNameThePath) {
  const auto path = write("bad.yaml", "job:\n  nodes: [\"abc\"]\n");
  EXPECT_THAT(error_lines(load_gateway_config(path)),
              ElementsAre(StartsWith(path + ": job.nodes[0]: \"abc\" is not host:port")));
}

TEST_F(LoadConfig, MissingFileIsNotFoundAndNamesThePath) {
  const std::string path = (dir_ / "absent.yaml").string();
  const auto result = load_gateway_config(path);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), ErrorCode::kNotFound);
  EXPECT_THAT(result.status().message(), HasSubstr(path));
}

TEST_F(LoadConfig, DirectoryIsNotAConfigFile) {
  const auto result = load_gateway_config(dir_.string());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("is not a file"));
}

TEST_F(LoadConfig, ReadsTheProcessEnvironmentBeforeSet) {
  const auto path = write("gateway.yaml", "job:\n  nodes: [\"127.0.0.1:29500\"]\n");
  const ScopedEnv workers("GRADGATE_JOB_LOCAL_WORKERS", "3");
  const ScopedEnv level("GRADGATE_LOGGING_LEVEL", "warn");
  const auto config = load_gateway_config(path, {"logging.level=error"});
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->local_workers, 3u);
  EXPECT_EQ(config->log_level, "error");
}

TEST_F(LoadConfig, UnknownProcessVariableIsAnError) {
  const auto path = write("gateway.yaml", "job:\n  nodes: [\"127.0.0.1:29500\"]\n");
  const ScopedEnv typo("GRADGATE_TRANSPORT_LISTEN_PORT", "1");
  EXPECT_THAT(error_lines(load_gateway_config(path)),
              ElementsAre("environment GRADGATE_TRANSPORT_LISTEN_PORT: transport.listen_port: "
                          "unknown key"));
}

}  // namespace
}  // namespace gradgate::gateway
