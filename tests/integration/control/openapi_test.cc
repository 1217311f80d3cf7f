// docs/openapi.yaml and the controller cannot drift apart: every (path, method, status) that the
// document lists for the controller was answered by some case of api_cases.h, and every answer
// of a case is in the document (a 405 means the document has the path but not the method). The
// gateway's paths (tag "gateway" only) are checked by the gateway's tests.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "api_cases.h"

namespace gradgate::control::testing {
namespace {

using Answer = std::tuple<std::string, std::string, int>;  // path, method, status

constexpr const char* kMethods[] = {"get", "put", "post", "delete", "patch"};

std::string lower(std::string_view text) {
  std::string lowered(text);
  std::transform(lowered.begin(), lowered.end(), lowered.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lowered;
}

bool has_tag(const YAML::Node& operation, const std::string& tag) {
  for (const auto& each : operation["tags"]) {
    if (each.as<std::string>() == tag) return true;
  }
  return false;
}

class OpenApiTest : public ControlFixture {
 protected:
  void SetUp() override { document_ = YAML::LoadFile(GRADGATE_SOURCE_DIR "/docs/openapi.yaml"); }

  // The controller's (path, method, status) triples of the document.
  std::set<Answer> documented() const {
    std::set<Answer> answers;
    for (const auto& path : document_["paths"]) {
      for (const char* method : kMethods) {
        const YAML::Node operation = path.second[method];
        if (!operation || !has_tag(operation, "controller")) continue;
        for (const auto& response : operation["responses"]) {
          // A response only the gateway gives (/readyz's 503) is the gateway tests' to check.
          if (response.second["x-gradgate-component"].as<std::string>("") == "gateway") continue;
          answers.emplace(path.first.as<std::string>(), method, response.first.as<int>());
        }
      }
    }
    return answers;
  }

  bool documents(const std::string& path, const std::string& method) const {
    return document_["paths"][path] && document_["paths"][path][method];
  }

  YAML::Node document_;
};

TEST_F(OpenApiTest, DocumentIsOpenApi3WithProblemSchemas) {
  EXPECT_EQ(document_["openapi"].as<std::string>().rfind("3.0", 0), 0u);
  EXPECT_TRUE(document_["components"]["schemas"]["Problem"]);
  for (const char* gateway_path : {"/livez", "/readyz", "/metrics", "/v1/status"}) {
    ASSERT_TRUE(document_["paths"][gateway_path]) << gateway_path;
    EXPECT_TRUE(has_tag(document_["paths"][gateway_path]["get"], "gateway")) << gateway_path;
  }
  EXPECT_FALSE(has_tag(document_["paths"]["/v1/status"]["get"], "controller"));
}

TEST_F(OpenApiTest, DocumentAndServerAnswerTheSame) {
  start();
  {
    TestClient setup = connect();
    register_known_job(setup);
  }
  std::set<Answer> seen;
  const auto send_cases = [&](const std::vector<ApiCase>& cases) {
    for (const ApiCase& api_case : cases) {
      TestClient client = connect();  // some refusals close their connection
      const Reply reply = send_case(client, api_case);
      EXPECT_EQ(reply.result(), api_case.expected) << api_case.name << ": " << reply.body();
      const std::string method = lower(boost::beast::http::to_string(api_case.method));
      const int code = static_cast<int>(reply.result());
      if (code == 405) {
        EXPECT_TRUE(document_["paths"][api_case.pattern]) << api_case.pattern;
        EXPECT_FALSE(documents(api_case.pattern, method))
            << api_case.name << ": the document has " << method << " " << api_case.pattern;
        continue;
      }
      seen.emplace(api_case.pattern, method, code);
    }
  };
  send_cases(api_cases());
  start(full_controller_config());  // a controller that keeps no further job
  {
    TestClient setup = connect();
    ASSERT_NO_FATAL_FAILURE(full_controller_setup(setup));
  }
  send_cases(full_controller_cases());
  const std::set<Answer> in_document = documented();
  for (const auto& [path, method, code] : in_document) {
    EXPECT_TRUE(seen.contains({path, method, code}))
        << "documented but never seen: " << method << " " << path << " " << code;
  }
  for (const auto& [path, method, code] : seen) {
    EXPECT_TRUE(in_document.contains({path, method, code}))
        << "answered but not documented: " << method << " " << path << " " << code;
  }
}

}  // namespace
}  // namespace gradgate::control::testing
