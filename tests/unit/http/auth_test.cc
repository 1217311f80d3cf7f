// Bearer-token authentication over real HTTP (401, 403, 200) and loading the token from a file
// or an environment variable.
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/http/token.h"
#include "http_test_support.h"

namespace gradgate::http::testing {
namespace {

constexpr const char* kToken = "s3cret-token";

void add_policy_routes(HttpServer& server) {
  server.add_route(verb::get, "/v1/policy", [](const Request&) {
    return json_response({{"policy", "static"}});
  });
  server.add_route(verb::put, "/v1/policy",
                   [](const Request&) {
                     return json_response({{"stored", true}});
                   },
                   {.requires_token = true});
}

class AuthTest : public ServerFixture {
 protected:
  void SetUp() override { start_server({.token = TokenCheck(kToken)}, add_policy_routes); }

  Reply put_with_authorization(std::string authorization) {
    return connect().send(verb::put, "/v1/policy", {},
                          {{beast_http::field::authorization, std::move(authorization)}});
  }
};

TEST_F(AuthTest, MissingAuthorizationIs401WithChallenge) {
  TestClient client = connect();
  const Reply reply = client.send(verb::put, "/v1/policy");
  expect_problem(reply, status::unauthorized, "Authorization", "Bearer");
  EXPECT_EQ(reply[beast_http::field::www_authenticate], R"(Bearer realm="gradgate")");
  EXPECT_EQ(client.send(verb::get, "/v1/policy").result(), status::ok);  // still connected
}

TEST_F(AuthTest, OtherSchemeIs401) {
  const Reply basic = put_with_authorization("Basic czNjcmV0LXRva2Vu");
  expect_problem(basic, status::unauthorized, "Authorization");
  EXPECT_EQ(basic[beast_http::field::www_authenticate], R"(Bearer realm="gradgate")");
  expect_problem(put_with_authorization("Bearer"), status::unauthorized, "Authorization");
  expect_problem(put_with_authorization(kToken), status::unauthorized, "Authorization");
}

TEST_F(AuthTest, WrongTokenIs403) {
  expect_problem(put_with_authorization("Bearer wrong"), status::forbidden, "Authorization");
  expect_problem(put_with_authorization(std::string("Bearer ") + kToken + "x"), status::forbidden,
                 "Authorization");
  expect_problem(put_with_authorization("Bearer s3cret-toke"), status::forbidden, "Authorization");
}

TEST_F(AuthTest, RightTokenIsServed) {
  EXPECT_EQ(put_with_authorization(std::string("Bearer ") + kToken).result(), status::ok);
  EXPECT_EQ(put_with_authorization(std::string("bearer ") + kToken).result(), status::ok);
}

TEST_F(AuthTest, RoutesWithoutTokenNeedNone) {
  EXPECT_EQ(connect().send(verb::get, "/v1/policy").result(), status::ok);
}

TEST(AuthDisabled, EmptyTokenLetsEveryRequestThrough) {
  HttpServer server({});
  add_policy_routes(server);
  ASSERT_TRUE(server.start().ok());
  EXPECT_EQ(TestClient(server.port()).send(verb::put, "/v1/policy").result(), status::ok);
}

TEST(TokenCheckTest, Verdicts) {
  const TokenCheck check("abc");
  EXPECT_TRUE(check.enabled());
  EXPECT_EQ(check.check(""), TokenCheck::Verdict::kMissing);
  EXPECT_EQ(check.check("Token abc"), TokenCheck::Verdict::kNotBearer);
  EXPECT_EQ(check.check("Bearer "), TokenCheck::Verdict::kNotBearer);
  EXPECT_EQ(check.check("Bearer ab"), TokenCheck::Verdict::kWrongToken);
  EXPECT_EQ(check.check("Bearer abcabc"), TokenCheck::Verdict::kWrongToken);
  EXPECT_EQ(check.check("Bearer abd"), TokenCheck::Verdict::kWrongToken);
  EXPECT_EQ(check.check("BEARER  abc"), TokenCheck::Verdict::kAllowed);
  EXPECT_FALSE(TokenCheck().enabled());
  EXPECT_EQ(TokenCheck().check(""), TokenCheck::Verdict::kAllowed);
}

class LoadTokenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "gradgate-token-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    directory_ = pattern;
    variable_ = "GRADGATE_TEST_TOKEN_" + std::to_string(getpid()) + "_" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  void TearDown() override {
    unsetenv(variable_.c_str());
    std::filesystem::remove_all(directory_);
  }

  std::filesystem::path write_file(const std::string& text) {
    const std::filesystem::path path = directory_ / "token";
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  std::filesystem::path directory_;
  std::string variable_;
};

TEST_F(LoadTokenTest, FromFileWithTrailingNewlineTrimmed) {
  const Result<std::string> token = load_token(write_file("abc123\n"), variable_);
  ASSERT_TRUE(token.ok()) << token.status().to_string();
  EXPECT_EQ(*token, "abc123");
  EXPECT_EQ(*load_token(write_file("abc123\r\n"), variable_), "abc123");
}

TEST_F(LoadTokenTest, FileWinsOverEnvironment) {
  setenv(variable_.c_str(), "from-env", 1);
  EXPECT_EQ(*load_token(write_file("from-file"), variable_), "from-file");
  EXPECT_EQ(*load_token({}, variable_), "from-env");
}

TEST_F(LoadTokenTest, ErrorsNameTheFileOrVariable) {
  const std::filesystem::path missing = directory_ / "missing";
  const Result<std::string> unreadable = load_token(missing, variable_);
  EXPECT_EQ(unreadable.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(unreadable.status().message().find(missing.string()), std::string::npos);

  const Result<std::string> empty = load_token(write_file("\n"), variable_);
  EXPECT_EQ(empty.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("empty"), std::string::npos);

  EXPECT_EQ(load_token(write_file("two words"), variable_).status().code(),
            ErrorCode::kInvalidArgument);

  const Result<std::string> unset = load_token({}, variable_);
  EXPECT_EQ(unset.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(unset.status().message().find(variable_), std::string::npos);
}

}  // namespace
}  // namespace gradgate::http::testing
