// The table of REST cases run against the controller: for every route, a success and each way a
// request can be refused (auth, malformed JSON, wrong type, out of range, unknown member,
// oversized body, wrong content type, unknown job, every rank taken, wrong method), with the status
// and the problem's `field` it must get. api_test.cc runs each case on its own server;
// openapi_test.cc runs them all and compares what it saw with docs/openapi.yaml.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "control_test_support.h"

namespace gradgate::control::testing {

enum class Auth { kBearer, kNone, kWrongToken };

struct ApiCase {
  std::string name;  // a test name: letters, digits, '_'
  verb method;
  std::string pattern;  // the route pattern, as in the OpenAPI document
  std::string target;   // path and query
  std::string body;     // sent as it is
  status expected;
  /// The problem's `field` for an error ("" for none); ignored for a success.
  std::string field;
  Auth auth = Auth::kBearer;
  std::string content_type = "application/json";
};

/// Test names and failure messages show a case by its name.
inline void PrintTo(const ApiCase& api_case, std::ostream* out) { *out << api_case.name; }

/// Job 42 (two nodes, both reported) exists before each case; job 7 does not.
inline constexpr uint64_t kKnownJob = 42;

/// A body just over the test servers' limit (test_config(): 64 KiB).
inline std::string oversized_body() {
  return R"({"pad":")" + std::string(70 * 1024, 'x') + R"("})";
}

inline std::string with(nlohmann::json body, const std::string& key, nlohmann::json value) {
  body[key] = std::move(value);
  return body.dump();
}

// `body` with `count` tensors of 1000 elements.
inline nlohmann::json with_tensors(nlohmann::json body, size_t count) {
  body["tensors"] = nlohmann::json::array();
  for (size_t t = 0; t < count; ++t) {
    std::string name = "layer";
    name += std::to_string(t);
    body["tensors"].push_back({{"name", std::move(name)}, {"elements", 1000}});
  }
  return body;
}

// POST /v1/nodes: a report, and each way one is refused.
inline std::vector<ApiCase> report_cases() {
  const nlohmann::json node = report(kKnownJob, 1, 2, 10);
  nlohmann::json bad_link = node;
  bad_link["links"] = {
      {{"peer", 0}, {"goodput_bytes_per_second", 0}, {"rtt_seconds", 0}, {"age_seconds", 0}}};
  nlohmann::json unknown_codec = node;
  unknown_codec["codec_speeds"] = {
      {{"codec", "zip"}, {"encode_bytes_per_second", 1e9}, {"decode_bytes_per_second", 1e9}}};
  nlohmann::json no_address = node;
  no_address.erase("address");
  nlohmann::json bad_address = node;
  bad_address["address"] = "0:4001";  // a shorthand address, which the others could not dial
  nlohmann::json unknown_dtype = node;
  unknown_dtype["tensors"] = {{{"name", "w"}, {"elements", 10}, {"dtype", "int8"}}};
  nlohmann::json huge_volume = node;  // two of them would sum to infinity
  huge_volume["workers"] = {{{"local_rank", 0}, {"data_volume", 1e308}}};
  return {
      {"ReportOk", verb::post, "/v1/nodes", "/v1/nodes", node.dump(), status::ok, ""},
      {"ReportNoToken", verb::post, "/v1/nodes", "/v1/nodes", node.dump(), status::unauthorized,
       "Authorization", Auth::kNone},
      {"ReportWrongToken", verb::post, "/v1/nodes", "/v1/nodes", node.dump(), status::forbidden,
       "Authorization", Auth::kWrongToken},
      {"ReportMalformedJson", verb::post, "/v1/nodes", "/v1/nodes", R"({"job_id": 42,)",
       status::bad_request, ""},
      {"ReportWrongType", verb::post, "/v1/nodes", "/v1/nodes", with(node, "job_id", "42"),
       status::bad_request, "/job_id"},
      {"ReportMissingMember", verb::post, "/v1/nodes", "/v1/nodes", no_address.dump(),
       status::bad_request, "/address"},
      {"ReportBadAddress", verb::post, "/v1/nodes", "/v1/nodes", bad_address.dump(),
       status::unprocessable_entity, "/address"},
      {"ReportLargestJobId", verb::post, "/v1/nodes", "/v1/nodes",
       with(node, "job_id", 18446744073709551615u), status::ok, ""},
      {"ReportTooManyNodes", verb::post, "/v1/nodes", "/v1/nodes", with(node, "nodes", 65537),
       status::unprocessable_entity, "/nodes"},
      {"ReportTooManyCodecs", verb::post, "/v1/nodes", "/v1/nodes",
       with(with_tensors(node, 65), "nodes", 65536), status::unprocessable_entity, "/tensors"},
      {"ReportNumberBeyondADouble", verb::post, "/v1/nodes", "/v1/nodes",
       R"({"job_id": 42, "step": 1e400})", status::bad_request, ""},
      {"ReportNodeOutOfRange", verb::post, "/v1/nodes", "/v1/nodes", with(node, "node", 2),
       status::unprocessable_entity, "/node"},
      {"ReportStepBeyondADoublesIntegers", verb::post, "/v1/nodes", "/v1/nodes",
       with(node, "step", 9007199254740993u), status::unprocessable_entity, "/step"},
      {"ReportVersionBeyond32Bits", verb::post, "/v1/nodes", "/v1/nodes",
       with(node, "received_policy_version", 4294967296u), status::unprocessable_entity,
       "/received_policy_version"},
      {"ReportZeroGoodput", verb::post, "/v1/nodes", "/v1/nodes", bad_link.dump(),
       status::unprocessable_entity, "/links/0/goodput_bytes_per_second"},
      {"ReportHugeDataVolume", verb::post, "/v1/nodes", "/v1/nodes", huge_volume.dump(),
       status::unprocessable_entity, "/workers/0/data_volume"},
      {"ReportUnknownCodec", verb::post, "/v1/nodes", "/v1/nodes", unknown_codec.dump(),
       status::unprocessable_entity, "/codec_speeds/0/codec"},
      {"ReportUnknownDtype", verb::post, "/v1/nodes", "/v1/nodes", unknown_dtype.dump(),
       status::unprocessable_entity, "/tensors/0/dtype"},
      {"ReportUnknownMember", verb::post, "/v1/nodes", "/v1/nodes", with(node, "colour", "red"),
       status::bad_request, "/colour"},
      {"ReportOversized", verb::post, "/v1/nodes", "/v1/nodes", oversized_body(),
       status::payload_too_large, ""},
      {"ReportNotJson", verb::post, "/v1/nodes", "/v1/nodes", "job_id=42",
       status::unsupported_media_type, "Content-Type", Auth::kBearer, "text/plain"},
      {"NodesWrongMethod", verb::delete_, "/v1/nodes", "/v1/nodes", "", status::method_not_allowed,
       ""},
  };
}

// GET /v1/nodes, /v1/links, /v1/jobs and /v1/jobs/{id}.
inline std::vector<ApiCase> read_cases() {
  return {
      {"NodesAll", verb::get, "/v1/nodes", "/v1/nodes", "", status::ok, ""},
      {"NodesOfJob", verb::get, "/v1/nodes", "/v1/nodes?job_id=42", "", status::ok, ""},
      {"NodesBadJobId", verb::get, "/v1/nodes", "/v1/nodes?job_id=abc", "", status::bad_request,
       "job_id"},
      {"NodesUnknownJob", verb::get, "/v1/nodes", "/v1/nodes?job_id=7", "", status::not_found,
       "job_id"},
      {"NodesUnknownQueryParameter", verb::get, "/v1/nodes", "/v1/nodes?job=42", "",
       status::bad_request, "job"},
      {"LinksAll", verb::get, "/v1/links", "/v1/links", "", status::ok, ""},
      {"LinksBadJobId", verb::get, "/v1/links", "/v1/links?job_id=-1", "", status::bad_request,
       "job_id"},
      {"LinksUnknownJob", verb::get, "/v1/links", "/v1/links?job_id=7", "", status::not_found,
       "job_id"},
      {"LinksWrongMethod", verb::post, "/v1/links", "/v1/links", "{}", status::method_not_allowed,
       ""},
      {"Jobs", verb::get, "/v1/jobs", "/v1/jobs", "", status::ok, ""},
      {"Job", verb::get, "/v1/jobs/{id}", "/v1/jobs/42", "", status::ok, ""},
      {"JobBadId", verb::get, "/v1/jobs/{id}", "/v1/jobs/forty-two", "", status::bad_request, "id"},
      {"JobUnknown", verb::get, "/v1/jobs/{id}", "/v1/jobs/7", "", status::not_found, "id"},
  };
}

// POST /v1/jobs/{id}/ranks (job 42's two ranks are reported by gateways without names).
inline std::vector<ApiCase> rank_cases() {
  const std::string claim = R"({"name":"node-a","nodes":3})";
  return {
      {"RanksOk", verb::post, "/v1/jobs/{id}/ranks", "/v1/jobs/42/ranks", claim, status::ok, ""},
      {"RanksNoToken", verb::post, "/v1/jobs/{id}/ranks", "/v1/jobs/42/ranks", claim,
       status::unauthorized, "Authorization", Auth::kNone},
      {"RanksWrongToken", verb::post, "/v1/jobs/{id}/ranks", "/v1/jobs/42/ranks", claim,
       status::forbidden, "Authorization", Auth::kWrongToken},
      {"RanksMalformedJson", verb::post, "/v1/jobs/{id}/ranks", "/v1/jobs/42/ranks",
       R"({"name": "node-a")", status::bad_request, ""},
      {"RanksWrongType", verb::post, "/v1/jobs/{id}/ranks", "/v1/jobs/42/ranks",
       R"({"name":"node-a","nodes":"3"})", status::bad_request, "/nodes"},
      {"RanksMissingName", verb::post, "/v1/jobs/{id}/ranks", "/v1/jobs/42/ranks", R"({"nodes":3})",
       status::bad_request, "/name"},
      {"RanksUnknownMember", verb::post, "/v1/jobs/{id}/ranks", "/v1/jobs/42/ranks",
       R"({"name":"node-a","nodes":3,"rank":0})", status::bad_request, "/rank"},
      {"RanksBadJobId", verb::post, "/v1/jobs/{id}/ranks", "/v1/jobs/42x/ranks", claim,
       status::bad_request, "id"},
      {"RanksBadName", verb::post, "/v1/jobs/{id}/ranks", "/v1/jobs/42/ranks",
       R"({"name":"node a","nodes":3})", status::unprocessable_entity, "/name"},
      {"RanksNameTooLong", verb::post, "/v1/jobs/{id}/ranks", "/v1/jobs/42/ranks",
       with(nlohmann::json::parse(claim), "name", std::string(254, 'n')),
       status::unprocessable_entity, "/name"},
      {"RanksNodesOutOfRange", verb::post, "/v1/jobs/{id}/ranks", "/v1/jobs/42/ranks",
       R"({"name":"node-a","nodes":65537})", status::unprocessable_entity, "/nodes"},
      {"RanksAllHeld", verb::post, "/v1/jobs/{id}/ranks", "/v1/jobs/42/ranks",
       R"({"name":"node-a","nodes":2})", status::conflict, ""},
      {"RanksOversized", verb::post, "/v1/jobs/{id}/ranks", "/v1/jobs/42/ranks", oversized_body(),
       status::payload_too_large, ""},
      {"RanksNotJson", verb::post, "/v1/jobs/{id}/ranks", "/v1/jobs/42/ranks", "name=node-a",
       status::unsupported_media_type, "Content-Type", Auth::kBearer, "text/plain"},
      {"RanksWrongMethod", verb::get, "/v1/jobs/{id}/ranks", "/v1/jobs/42/ranks", "",
       status::method_not_allowed, ""},
  };
}

// GET and PUT /v1/policy.
inline std::vector<ApiCase> policy_cases() {
  const std::string settings = R"({"policy":"bandwidth","target_communicate_seconds":0.05})";
  return {
      {"PolicySettings", verb::get, "/v1/policy", "/v1/policy", "", status::ok, ""},
      {"PolicyOfJob", verb::get, "/v1/policy", "/v1/policy?job_id=42", "", status::ok, ""},
      {"PolicyBadJobId", verb::get, "/v1/policy", "/v1/policy?job_id=4x", "", status::bad_request,
       "job_id"},
      {"PolicyUnknownJob", verb::get, "/v1/policy", "/v1/policy?job_id=7", "", status::not_found,
       "job_id"},
      {"PolicyWaitTooLong", verb::get, "/v1/policy", "/v1/policy?job_id=42&wait_ms=60001", "",
       status::unprocessable_entity, "wait_ms"},
      {"PolicyMisspeltQueryParameter", verb::get, "/v1/policy", "/v1/policy?jobid=42", "",
       status::bad_request, "jobid"},
      {"PolicyOfNode", verb::get, "/v1/policy", "/v1/policy?job_id=42&node=1", "", status::ok, ""},
      {"PolicyNodeBeyondJob", verb::get, "/v1/policy", "/v1/policy?job_id=42&node=2", "",
       status::unprocessable_entity, "node"},
      {"PolicyBadNode", verb::get, "/v1/policy", "/v1/policy?job_id=42&node=-1", "",
       status::bad_request, "node"},
      {"PutPolicyOk", verb::put, "/v1/policy", "/v1/policy", settings, status::ok, ""},
      {"PutPolicyNoToken", verb::put, "/v1/policy", "/v1/policy", settings, status::unauthorized,
       "Authorization", Auth::kNone},
      {"PutPolicyWrongToken", verb::put, "/v1/policy", "/v1/policy", settings, status::forbidden,
       "Authorization", Auth::kWrongToken},
      {"PutPolicyMalformedJson", verb::put, "/v1/policy", "/v1/policy", "{policy: static}",
       status::bad_request, ""},
      {"PutPolicyWrongType", verb::put, "/v1/policy", "/v1/policy",
       R"({"policy":"static","warmup_steps":"ten"})", status::bad_request, "/warmup_steps"},
      {"PutPolicyUnknownName", verb::put, "/v1/policy", "/v1/policy", R"({"policy":"fastest"})",
       status::unprocessable_entity, "/policy"},
      {"PutPolicyTargetOutOfRange", verb::put, "/v1/policy", "/v1/policy",
       R"({"policy":"bandwidth","target_communicate_seconds":0})", status::unprocessable_entity,
       "/target_communicate_seconds"},
      {"PutPolicyBadLadderCodec", verb::put, "/v1/policy", "/v1/policy",
       R"({"policy":"bandwidth","ladder":["none","zip"]})", status::unprocessable_entity,
       "/ladder/1"},
      {"PutPolicyRuleDensityOutOfRange", verb::put, "/v1/policy", "/v1/policy",
       R"({"policy":"static","rules":[{"glob":"fc*","max_density":2}]})",
       status::unprocessable_entity, "/rules/0/max_density"},
      {"PutPolicyUnknownMember", verb::put, "/v1/policy", "/v1/policy",
       R"({"policy":"static","speed":"max"})", status::bad_request, "/speed"},
      {"PutPolicyOversized", verb::put, "/v1/policy", "/v1/policy", oversized_body(),
       status::payload_too_large, ""},
      {"PutPolicyNotJson", verb::put, "/v1/policy", "/v1/policy", "policy=static",
       status::unsupported_media_type, "Content-Type", Auth::kBearer, "text/plain"},
      {"PolicyWrongMethod", verb::post, "/v1/policy", "/v1/policy", settings,
       status::method_not_allowed, ""},
  };
}

// GET and PUT /v1/budget.
inline std::vector<ApiCase> budget_cases() {
  const std::string budget = R"({"traffic_budget":0.02})";
  return {
      {"Budget", verb::get, "/v1/budget", "/v1/budget?job_id=42", "", status::ok, ""},
      {"BudgetNoJobId", verb::get, "/v1/budget", "/v1/budget", "", status::bad_request, "job_id"},
      {"BudgetUnknownJob", verb::get, "/v1/budget", "/v1/budget?job_id=7", "", status::not_found,
       "job_id"},
      {"PutBudgetOk", verb::put, "/v1/budget", "/v1/budget", budget, status::ok, ""},
      {"PutBudgetClear", verb::put, "/v1/budget", "/v1/budget", R"({"traffic_budget":null})",
       status::ok, ""},
      {"PutBudgetNoToken", verb::put, "/v1/budget", "/v1/budget", budget, status::unauthorized,
       "Authorization", Auth::kNone},
      {"PutBudgetWrongToken", verb::put, "/v1/budget", "/v1/budget", budget, status::forbidden,
       "Authorization", Auth::kWrongToken},
      {"PutBudgetMalformedJson", verb::put, "/v1/budget", "/v1/budget", "[1,2", status::bad_request,
       ""},
      {"PutBudgetWrongType", verb::put, "/v1/budget", "/v1/budget", R"({"traffic_budget":"low"})",
       status::bad_request, "/traffic_budget"},
      {"PutBudgetOutOfRange", verb::put, "/v1/budget", "/v1/budget", R"({"traffic_budget":1.5})",
       status::unprocessable_entity, "/traffic_budget"},
      {"PutBudgetUnknownMember", verb::put, "/v1/budget", "/v1/budget",
       R"({"traffic_budget":0.1,"job_id":42})", status::bad_request, "/job_id"},
      {"PutBudgetOversized", verb::put, "/v1/budget", "/v1/budget", oversized_body(),
       status::payload_too_large, ""},
      {"PutBudgetNotJson", verb::put, "/v1/budget", "/v1/budget", "0.02",
       status::unsupported_media_type, "Content-Type", Auth::kBearer, "text/plain"},
  };
}

// The probes and the metrics.
inline std::vector<ApiCase> probe_cases() {
  return {
      {"Livez", verb::get, "/livez", "/livez", "", status::ok, ""},
      {"Readyz", verb::get, "/readyz", "/readyz", "", status::ok, ""},
      {"Metrics", verb::get, "/metrics", "/metrics", "", status::ok, ""},
      {"MetricsWrongMethod", verb::put, "/metrics", "/metrics", "{}", status::method_not_allowed,
       ""},
  };
}

/// Every case, route by route.
inline std::vector<ApiCase> api_cases() {
  std::vector<ApiCase> cases;
  for (const std::vector<ApiCase>& group : {report_cases(), read_cases(), rank_cases(),
                                            policy_cases(), budget_cases(), probe_cases()}) {
    cases.insert(cases.end(), group.begin(), group.end());
  }
  return cases;
}

/// Starts job 42: node 0 reports its link from node 1 and a tensor, node 1 reports too.
inline void register_known_job(TestClient& client) {
  nlohmann::json first = report(kKnownJob, 0, 2, 10);
  first["links"] = {{{"peer", 1},
                     {"goodput_bytes_per_second", 1.25e8},
                     {"rtt_seconds", 0.0002},
                     {"age_seconds", 0.1}}};
  first["tensors"] = {{{"name", "fc1.weight"}, {"elements", 1 << 20}}};
  for (const nlohmann::json& body : {first, report(kKnownJob, 1, 2, 10)}) {
    const Reply reply = client.send_json(verb::post, "/v1/nodes", body.dump(), bearer());
    ASSERT_EQ(reply.result(), status::ok) << reply.body();
  }
}

/// A controller out of room: it keeps one job (nodes.max_jobs: 1; set up with
/// full_controller_setup()), and its policy.settings_file lies where no file can be made.
inline ControlConfig full_controller_config() {
  ControlConfig config = test_config();
  config.max_jobs = 1;
  config.settings_file = "/proc/gradgate/settings.json";
  return config;
}

/// Job 42 reported (register_known_job) and job 9 holds a rank claim: the reports and the rank
/// table are full.
inline void full_controller_setup(TestClient& client) {
  register_known_job(client);
  const Reply claimed =
      client.send_json(verb::post, "/v1/jobs/9/ranks", R"({"name":"node-a","nodes":2})", bearer());
  ASSERT_EQ(claimed.result(), status::ok) << claimed.body();
}

/// The cases of a full controller: a new job's report and rank claim, and settings it cannot save.
inline std::vector<ApiCase> full_controller_cases() {
  return {{"ReportNewJobWhenFull", verb::post, "/v1/nodes", "/v1/nodes", report(7, 0, 1).dump(),
           status::service_unavailable, ""},
          {"RanksNewJobWhenFull", verb::post, "/v1/jobs/{id}/ranks", "/v1/jobs/7/ranks",
           R"({"name":"node-a","nodes":2})", status::service_unavailable, ""},
          {"PutPolicyNotSaved", verb::put, "/v1/policy", "/v1/policy",
           R"({"policy":"static","default_codec":"fp16"})", status::service_unavailable, ""},
          {"PutBudgetNotSaved", verb::put, "/v1/budget", "/v1/budget", R"({"traffic_budget":0.1})",
           status::service_unavailable, ""}};
}

/// Sends a case's request on `client` and returns the reply.
inline Reply send_case(TestClient& client, const ApiCase& api_case) {
  Headers headers;
  if (api_case.auth == Auth::kBearer) headers = bearer();
  if (api_case.auth == Auth::kWrongToken) headers = bearer("not-the-token");
  if (!api_case.body.empty()) {
    headers.emplace_back(beast_http::field::content_type, api_case.content_type);
  }
  return client.send(api_case.method, api_case.target, api_case.body, headers);
}

}  // namespace gradgate::control::testing
