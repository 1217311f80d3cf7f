// Validation of JSON request bodies: over real HTTP through a PUT /v1/policy route (malformed
// JSON, wrong types, out-of-range values, unknown and missing fields, content type), and the
// validator's rules on their own.
#include "common/http/json_body.h"
#include "http_test_support.h"

namespace gradgate::http::testing {
namespace {

Response put_policy(const Request& request) {
  JsonBody body(request.body());
  const JsonObject policy = body.root();
  const auto target = policy.number("target_seconds", {.min = 0, .exclusive_min = true});
  const auto kind = policy.string("policy", {"static", "bandwidth", "dagc-r", "dagc-a"});
  const auto rules = policy.optional_objects("rules");
  for (const JsonObject& rule : rules.value_or(std::vector<JsonObject>{})) {
    rule.number("density", {.min = 0, .exclusive_min = true, .max = 1});
    rule.optional_integer("min_elements", {.min = 0});
  }
  if (auto error = body.finish()) return error->response();
  return json_response(
      {{"policy", *kind}, {"target_seconds", *target}, {"rules", rules ? rules->size() : 0}});
}

class JsonBodyOverHttpTest : public ServerFixture {
 protected:
  void SetUp() override {
    start_server({}, [](HttpServer& server) {
      server.add_route(verb::put, "/v1/policy", put_policy, {.json_body = true});
    });
  }

  Reply put(std::string json) {
    return connect().send_json(verb::put, "/v1/policy", std::move(json));
  }
};

TEST_F(JsonBodyOverHttpTest, ValidBodyIsServed) {
  const Reply reply = put(R"({"policy": "dagc-r", "target_seconds": 0.5,
              "rules": [{"density": 1}, {"density": 0.01, "min_elements": 4096}]})");
  ASSERT_EQ(reply.result(), status::ok) << reply.body();
  EXPECT_EQ(nlohmann::json::parse(reply.body()),
            nlohmann::json({{"policy", "dagc-r"}, {"target_seconds", 0.5}, {"rules", 2}}));
}

TEST_F(JsonBodyOverHttpTest, MalformedJsonIs400NamingThePosition) {
  expect_problem(put(R"({"policy": "static",)"), status::bad_request, {}, "line 1, column 21");
  expect_problem(put("{\n  \"policy\" \"static\"}"), status::bad_request, {}, "line 2, column");
  expect_problem(put(""), status::bad_request, {}, "empty");
}

TEST_F(JsonBodyOverHttpTest, ANumberBeyondADoubleIs400NotAServerError) {
  expect_problem(put(R"({"policy": "static", "target_seconds": 1e400})"), status::bad_request, {},
                 "number overflow");
}

TEST_F(JsonBodyOverHttpTest, BodyThatIsNotAnObjectIs400) {
  expect_problem(put("[1, 2]"), status::bad_request, {}, "must be a JSON object");
  expect_problem(put("null"), status::bad_request, {}, "must be a JSON object");
}

TEST_F(JsonBodyOverHttpTest, WrongTypeIs400NamingTheField) {
  expect_problem(put(R"({"policy": "static", "target_seconds": "fast"})"), status::bad_request,
                 "/target_seconds", "/target_seconds: must be a number");
  expect_problem(put(R"({"policy": 3, "target_seconds": 1})"), status::bad_request, "/policy",
                 "must be a string");
  expect_problem(put(R"({"policy": "static", "target_seconds": 1, "rules": {}})"),
                 status::bad_request, "/rules", "must be an array of objects");
  expect_problem(put(R"({"policy": "static", "target_seconds": 1, "rules": [{"density": 1}, 5]})"),
                 status::bad_request, "/rules/1", "must be an object");
  expect_problem(
      put(R"({"policy": "static", "target_seconds": 1, "rules": [{"density": 1, "min_elements": 2.5}]})"),
      status::bad_request, "/rules/0/min_elements", "must be an integer");
}

TEST_F(JsonBodyOverHttpTest, OutOfRangeIs422NamingTheField) {
  expect_problem(put(R"({"policy": "static", "target_seconds": 0})"), status::unprocessable_entity,
                 "/target_seconds", "/target_seconds: must be > 0");
  expect_problem(
      put(R"({"policy": "static", "target_seconds": 1, "rules": [{"density": 1}, {"density": 1.5}]})"),
      status::unprocessable_entity, "/rules/1/density", "/rules/1/density: must be in (0, 1]");
  expect_problem(
      put(R"({"policy": "static", "target_seconds": 1, "rules": [{"density": 0.5, "min_elements": -1}]})"),
      status::unprocessable_entity, "/rules/0/min_elements",
      "must be an integer in [0, 9223372036854775807]");
  expect_problem(put(R"({"policy": "fastest", "target_seconds": 1})"), status::unprocessable_entity,
                 "/policy", R"(must be one of "static", "bandwidth", "dagc-r", "dagc-a")");
}

TEST_F(JsonBodyOverHttpTest, UnknownFieldIs400NamingIt) {
  expect_problem(put(R"({"policy": "static", "target_seconds": 1, "colour": "red"})"),
                 status::bad_request, "/colour", "/colour: unknown field");
  expect_problem(
      put(R"({"policy": "static", "target_seconds": 1, "rules": [{"density": 1, "x/y": 1}], "z": 2})"),
      status::bad_request, "/z", "unknown fields: /z, /rules/0/x~1y");
}

TEST_F(JsonBodyOverHttpTest, ManyUnknownFieldsAreNamedUpToFiveAndCounted) {
  nlohmann::json body = {{"policy", "static"}, {"target_seconds", 1}};
  for (int i = 0; i < 1000; ++i) body["unknown_" + std::to_string(1000 + i)] = i;
  const Reply reply = put(body.dump());
  expect_problem(reply, status::bad_request, "/unknown_1000",
                 "unknown fields: /unknown_1000, /unknown_1001, /unknown_1002, /unknown_1003, "
                 "/unknown_1004 and 995 more");
  EXPECT_LT(reply.body().size(), 1000u) << "the error echoes the body";
}

TEST_F(JsonBodyOverHttpTest, AMemberRepeatedInItsObjectIs400NamingIt) {
  expect_problem(put(R"({"policy": "static", "target_seconds": 1, "policy": "dagc-r"})"),
                 status::bad_request, "/policy", "/policy: appears more than once in its object");
  expect_problem(put(R"({"policy": "static", "target_seconds": 1,
              "rules": [{"density": 1, "x": [1, {"a": 1}]}, {"density": 0.5, "density": 0.1}]})"),
                 status::bad_request, "/rules/1/density", "appears more than once");
  // The same name in different objects is no repetition.
  const Reply reply = put(R"({"policy": "static", "target_seconds": 1,
              "rules": [{"density": 1}, {"density": 0.5}]})");
  EXPECT_EQ(reply.result(), status::ok) << reply.body();
}

TEST_F(JsonBodyOverHttpTest, MissingFieldIs400NamingIt) {
  expect_problem(put(R"({"target_seconds": 1})"), status::bad_request, "/policy",
                 "/policy: is required");
}

TEST_F(JsonBodyOverHttpTest, FirstErrorInReadingOrderWins) {
  expect_problem(put(R"({"policy": 1, "target_seconds": -1, "extra": 0})"),
                 status::unprocessable_entity, "/target_seconds");
}

TEST_F(JsonBodyOverHttpTest, NonJsonContentTypeIs415) {
  TestClient client = connect();
  const Reply reply = client.send(verb::put, "/v1/policy", R"({"policy": "static"})",
                                  {{beast_http::field::content_type, "text/plain"}});
  expect_problem(reply, status::unsupported_media_type, "Content-Type", "application/json");
  expect_problem(client.send(verb::put, "/v1/policy", "{}"), status::unsupported_media_type,
                 "Content-Type");
  const Reply charset =
      client.send(verb::put, "/v1/policy", R"({"policy": "static", "target_seconds": 2})",
                  {{beast_http::field::content_type, "Application/JSON; charset=utf-8"}});
  EXPECT_EQ(charset.result(), status::ok) << charset.body();
}

TEST(JsonBodyTest, OptionalMembersMayBeAbsentButMustBeValidWhenPresent) {
  JsonBody absent(R"({})");
  const JsonObject root = absent.root();
  EXPECT_FALSE(root.optional_number("n").has_value());
  EXPECT_FALSE(root.optional_boolean("b").has_value());
  EXPECT_FALSE(root.optional_object("o").has_value());
  EXPECT_FALSE(absent.finish().has_value());

  JsonBody present(R"({"b": "yes"})");
  EXPECT_FALSE(present.root().optional_boolean("b").has_value());
  const auto error = present.finish();
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code, status::bad_request);
  EXPECT_EQ(error->field, "/b");
  EXPECT_EQ(error->detail, "/b: must be true or false");
}

TEST(JsonBodyTest, ValuesAndNestedObjects) {
  JsonBody body(R"({"n": 2, "big": 9007199254740993, "s": "x", "b": true,
                    "limits": {"max": 3.5}})");
  const JsonObject root = body.root();
  EXPECT_EQ(root.integer("n"), 2);
  EXPECT_EQ(root.integer("big"), 9007199254740993);
  EXPECT_EQ(root.string("s"), "x");
  EXPECT_EQ(root.boolean("b"), true);
  const auto limits = root.object("limits");
  ASSERT_TRUE(limits.has_value());
  EXPECT_EQ(limits->pointer(), "/limits");
  EXPECT_EQ(limits->number("max", {.max = 3.5}), 3.5);
  EXPECT_FALSE(body.finish().has_value());
}

TEST(JsonBodyTest, IntegerRules) {
  JsonBody body(R"({"float": 2.0})");
  const JsonObject root = body.root();
  EXPECT_FALSE(root.integer("float").has_value());
  EXPECT_EQ(body.finish()->detail, "/float: must be an integer");

  JsonBody huge(R"({"huge": 18446744073709551615})");
  EXPECT_FALSE(huge.root().integer("huge").has_value());
  EXPECT_EQ(huge.finish()->code, status::unprocessable_entity);
  EXPECT_EQ(huge.finish()->detail,
            "/huge: must be an integer in [-9223372036854775808, "
            "9223372036854775807]");

  JsonBody ids(R"({"largest": 18446744073709551615, "negative": -1})");
  EXPECT_EQ(ids.root().unsigned_integer("largest"), 18446744073709551615u);
  EXPECT_FALSE(ids.root().unsigned_integer("negative").has_value());
  EXPECT_EQ(ids.finish()->detail, "/negative: must be an integer in [0, 18446744073709551615]");

  JsonBody small(R"({"small": 3})");
  EXPECT_FALSE(small.root().integer("small", {.min = 4, .max = 8}).has_value());
  EXPECT_EQ(small.finish()->detail, "/small: must be an integer in [4, 8]");
}

TEST(JsonBodyTest, NumberBoundsAreDescribed) {
  struct Case {
    NumberRange range;
    const char* rule;
  };
  for (const Case& each :
       {Case{{.min = 10}, "must be >= 10"},
        Case{{.max = 0.25, .exclusive_max = true}, "must be < 0.25"},
        Case{{.min = -1, .max = 1, .exclusive_max = true}, "must be in [-1, 1)"}}) {
    JsonBody body(R"({"x": 7})");
    body.root().number("x", each.range);
    const auto error = body.finish();
    ASSERT_TRUE(error.has_value()) << each.rule;
    EXPECT_EQ(error->detail, std::string("/x: ") + each.rule);
    EXPECT_EQ(error->code, status::unprocessable_entity);
  }
}

TEST(JsonBodyTest, RejectRecordsCrossFieldRules) {
  JsonBody body(R"({"min": 5, "max": 2})");
  const JsonObject root = body.root();
  const auto low = root.number("min");
  const auto high = root.number("max");
  if (low && high && *high < *low) root.reject("max", "must be >= /min");
  const auto error = body.finish();
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code, status::unprocessable_entity);
  EXPECT_EQ(error->field, "/max");
  const Response response = error->response();
  EXPECT_EQ(response.code, status::unprocessable_entity);
  EXPECT_EQ(response.content_type, kProblemContentType);
  EXPECT_EQ(nlohmann::json::parse(response.body),
            nlohmann::json({{"type", "about:blank"},
                            {"title", "Unprocessable Entity"},
                            {"status", 422},
                            {"detail", "/max: must be >= /min"},
                            {"field", "/max"}}));
}

}  // namespace
}  // namespace gradgate::http::testing
