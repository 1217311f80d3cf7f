// Every case of api_cases.h over real HTTP, each on a fresh controller: the status, the problem
// body naming the bad input, and a server that still answers afterwards.
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
