// Validation of JSON request bodies: a handler states the rules of its body instead of repeating
// checks. Every error names the JSON pointer of the bad member and becomes a problem response:
// 400 when the body is not JSON or a member is missing, unknown, repeated in its object or of the
// wrong type; 422 when a value is out of its range or not one of the allowed ones.
//
//   JsonBody body(request.body());
//   JsonObject policy = body.root();
//   auto target = policy.number("target_seconds", {.min = 0, .exclusive_min = true});
//   auto kind = policy.string("policy", {"static", "bandwidth", "dagc-r", "dagc-a"});
//   if (auto rules = policy.optional_objects("rules")) {
//     for (const JsonObject& rule : *rules) rule.number("density", {.min = 0, .max = 1});
//   }
//   if (auto error = body.finish()) return error->response();
//   // Here every required value is present and valid: *target, *kind.
//
// Only the first error is kept (later checks still run but report nothing); finish() then checks
// every object that was read for members nobody asked for. Not thread-safe; objects are handles
// into their JsonBody and must not outlive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/http/message.h"

namespace gradgate::http {

/// Why a body was refused.
struct BodyError {
  status code;         // 400 or 422, as above
  std::string field;   // JSON pointer of the bad member ("/rules/0/density"); "" for the body
  std::string detail;  // "/rules/0/density: must be in (0, 1]"

  /// The problem+json response for this error.
  Response response() const;
};

/// Bounds of a number; an absent bound is no bound. Numbers must be finite either way.
struct NumberRange {
  std::optional<double> min{};
  bool exclusive_min = false;
  std::optional<double> max{};
  bool exclusive_max = false;
};

/// Inclusive bounds of an integer; an absent bound is no bound.
struct IntegerRange {
  std::optional<int64_t> min{};
  std::optional<int64_t> max{};
};

class JsonBody;

/// One JSON object of a body. Each accessor reads one member and returns its value, or nullopt
/// when it is absent (an error for the required form) or breaks its rule (always an error).
class JsonObject {
 public:
  std::optional<double> number(std::string_view key, const NumberRange& range = {}) const;
  std::optional<double> optional_number(std::string_view key, const NumberRange& range = {}) const;
  /// A JSON integer (2.0 is refused).
  std::optional<int64_t> integer(std::string_view key, const IntegerRange& range = {}) const;
  std::optional<int64_t> optional_integer(std::string_view key,
                                          const IntegerRange& range = {}) const;
  /// A JSON integer in [0, 2^64 - 1] (ids that use every bit).
  std::optional<uint64_t> unsigned_integer(std::string_view key) const;
  /// A string; when `one_of` is not empty, one of its values.
  std::optional<std::string> string(std::string_view key,
                                    std::initializer_list<std::string_view> one_of = {}) const;
  std::optional<std::string> optional_string(
      std::string_view key, std::initializer_list<std::string_view> one_of = {}) const;
  std::optional<bool> boolean(std::string_view key) const;
  std::optional<bool> optional_boolean(std::string_view key) const;
  std::optional<JsonObject> object(std::string_view key) const;
  std::optional<JsonObject> optional_object(std::string_view key) const;
  /// An array whose elements are all objects.
  std::optional<std::vector<JsonObject>> objects(std::string_view key) const;
  std::optional<std::vector<JsonObject>> optional_objects(std::string_view key) const;

  /// An array whose elements are all strings.
  std::optional<std::vector<std::string>> optional_strings(std::string_view key) const;
  /// Whether member `key` is present and JSON null (for members where null means "unset").
  bool is_null(std::string_view key) const;

  /// Records a 422 for member `key` with `rule` ("must be >= /min_density"): for rules that span
  /// several members.
  void reject(std::string_view key, std::string rule) const;

  /// The JSON pointer of this object ("" for the root).
  const std::string& pointer() const;

 private:
  friend class JsonBody;
  enum class Presence { kRequired, kOptional };

  JsonObject(JsonBody& body, std::size_t index) : body_(&body), index_(index) {}

  // The member `key`, marked as known; null when absent (an error when it is required).
  const nlohmann::json* member(std::string_view key, Presence presence) const;
  std::string pointer_to(std::string_view key) const;
  std::optional<double> read_number(std::string_view key, Presence presence,
                                    const NumberRange& range) const;
  // The member `key` when it is a JSON integer; null when absent (an error when required) or not
  // an integer (an error).
  const nlohmann::json* integer_member(std::string_view key, Presence presence) const;
  std::optional<int64_t> read_integer(std::string_view key, Presence presence,
                                      const IntegerRange& range) const;
  std::optional<std::string> read_string(std::string_view key, Presence presence,
                                         std::initializer_list<std::string_view> one_of) const;
  std::optional<bool> read_boolean(std::string_view key, Presence presence) const;
  std::optional<JsonObject> read_object(std::string_view key, Presence presence) const;
  std::optional<std::vector<JsonObject>> read_objects(std::string_view key,
                                                      Presence presence) const;

  JsonBody* body_;
  std::size_t index_;
};

/// A parsed request body and the first error found in it.
class JsonBody {
 public:
  /// Parses `text`; text that is not JSON is the first error (400 naming the position), a member
  /// name that repeats within an object the next (400 naming it).
  explicit JsonBody(std::string_view text);
  JsonBody(const JsonBody&) = delete;
  JsonBody& operator=(const JsonBody&) = delete;

  /// The top-level value, which must be an object.
  JsonObject root();
  /// The first error, else one naming the unknown members of the objects read (the first five,
  /// and how many more), else nullopt.
  std::optional<BodyError> finish() const;

 private:
  friend class JsonObject;
  struct ReadObject {
    const nlohmann::json* json;
    std::string pointer;
    std::set<std::string, std::less<>> known;
  };

  JsonObject open(const nlohmann::json& json, std::string pointer);
  void fail(status code, std::string pointer, std::string_view rule);

  nlohmann::json document_;
  std::vector<ReadObject> objects_;
  std::optional<BodyError> error_;
};

}  // namespace gradgate::http
