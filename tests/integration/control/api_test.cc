// Every case of api_cases.h over real HTTP, each on a fresh controller: the status, the problem
// body naming the bad input, and a server that still answers afterwards.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "api_cases.h"

namespace gradgate::control::testing {
namespace {

class ApiTest : public ControlFixture, public ::testing::WithParamInterface<ApiCase> {};

TEST_P(ApiTest, AnswersWithTheDocumentedStatus) {
  start();
  const ApiCase& api_case = GetParam();
  {
    TestClient setup = connect();
    register_known_job(setup);
  }
  TestClient client = connect();
  const Reply reply = send_case(client, api_case);
  if (static_cast<unsigned>(api_case.expected) < 400) {
    EXPECT_EQ(reply.result(), api_case.expected) << reply.body();
    EXPECT_NE(reply[beast_http::field::content_type].find(
                  api_case.pattern == "/metrics" ? "text/plain" : "application/json"),
              std::string::npos);
  } else {
    expect_problem(reply, api_case.expected, api_case.field);
  }
  // The server stays up: a new connection is served.
  TestClient after = connect();
  EXPECT_EQ(after.send(verb::get, "/livez").result(), status::ok);
}

std::string case_name(const ::testing::TestParamInfo<ApiCase>& api_case) {
  return api_case.param.name;
}

INSTANTIATE_TEST_SUITE_P(Controller, ApiTest, ::testing::ValuesIn(api_cases()), case_name);

class FullControllerApiTest : public ControlFixture,
                              public ::testing::WithParamInterface<ApiCase> {};

TEST_P(FullControllerApiTest, AnswersWithTheDocumentedStatus) {
  start(full_controller_config());
  {
    TestClient setup = connect();
    ASSERT_NO_FATAL_FAILURE(full_controller_setup(setup));
  }
  TestClient client = connect();
  expect_problem(send_case(client, GetParam()), GetParam().expected, GetParam().field);
  EXPECT_EQ(connect().send(verb::get, "/v1/jobs/42").result(), status::ok);  // it goes on
}

INSTANTIATE_TEST_SUITE_P(Controller, FullControllerApiTest,
                         ::testing::ValuesIn(full_controller_cases()), case_name);

class SettingsFileTest : public ControlFixture {};

// Settings that cannot be saved to policy.settings_file change nothing: the controller goes on
// with the ones it had.
TEST_F(SettingsFileTest, SettingsThatCannotBeSavedChangeNothing) {
  start(full_controller_config());
  TestClient client = connect();
  const std::string before = get(client, "/v1/policy").dump();
  const Reply put = client.send_json(verb::put, "/v1/policy",
                                     R"({"policy":"static","default_codec":"fp16"})", bearer());
  expect_problem(put, status::service_unavailable, "");
  EXPECT_NE(body_of(put)["detail"].get<std::string>().find("/proc/gradgate/settings.json"),
            std::string::npos)
      << put.body();
  EXPECT_EQ(get(client, "/v1/policy").dump(), before);
}

// Saving the settings does not hold up the API: while a PUT's save waits on the disk (here its
// temporary file is a FIFO that nobody reads yet, so opening it blocks), reports and reads are
// answered; the PUT is answered once the save ends (503: a FIFO cannot be flushed to a disk, so
// the settings stay as they were).
TEST_F(SettingsFileTest, ASaveThatWaitsOnTheDiskHoldsUpNoOtherRequest) {
  ControlConfig config = test_config();
  config.settings_file = (dir_.path() / "settings.json").string();
  const std::string fifo = config.settings_file + ".tmp";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  start(config);
  TestClient putter = connect();
  http::testing::ClientRequest put(verb::put, "/v1/policy", 11);
  put.set(beast_http::field::host, "127.0.0.1");
  put.set(beast_http::field::content_type, "application/json");
  put.set(beast_http::field::authorization, "Bearer " + std::string(kToken));
  put.body() = R"({"policy":"static","default_codec":"fp16"})";
  put.prepare_payload();
  ASSERT_FALSE(putter.write(put));  // nothing waits on the FIFO if the PUT was not sent

  TestClient other = connect();
  const nlohmann::json before = get(other, "/v1/policy");
  post_report(other, report(5, 0, 1));
  EXPECT_EQ(get(other, "/v1/jobs").size(), 1u);

  // The save goes on (no ASSERT before this line: a save left waiting would hold the server's
  // end).
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  EXPECT_GE(reader, 0) << std::strerror(errno);
  Reply answer;
  ASSERT_FALSE(putter.read(answer));
  ::close(reader);
  expect_problem(answer, status::service_unavailable, "", "cannot write");
  EXPECT_EQ(get(other, "/v1/policy"), before);
}

class ControllerConnectionsTest : public ControlFixture {};

// server.max_connections reaches the server: with one slot, a second connection takes the slot
// of the first (idle after its answer), which is closed.
TEST_F(ControllerConnectionsTest, ServerMaxConnectionsBoundsTheConnections) {
  ControlConfig config = test_config();
  config.max_connections = 1;
  config.request_timeout = std::chrono::seconds(60);  // no idle close within the client's 10 s
  start(config);
  TestClient first = connect();
  ASSERT_EQ(first.send(verb::get, "/livez").result(), status::ok);
  EXPECT_EQ(connect().send(verb::get, "/livez").result(), status::ok);
  Reply none;
  EXPECT_TRUE(closed_without_answer(first.read(none)));
}

}  // namespace
}  // namespace gradgate::control::testing
