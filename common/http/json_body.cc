#include "common/http/json_body.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>

#include "common/http/problem.h"

namespace gradgate::http {
namespace {

const nlohmann::json& empty_object() {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  return kEmpty;
}

// RFC 6901: '~' and '/' in a key are written "~0" and "~1".
std::string escape_pointer_token(std::string_view key) {
  std::string escaped;
  for (char c : key) {
    if (c == '~') {
      escaped += "~0";
    } else if (c == '/') {
      escaped += "~1";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

std::string format_number(double value) {
  char text[32];
  const auto result = std::to_chars(std::begin(text), std::end(text), value);
  return std::string(text, result.ptr);
}

std::string number_rule(const NumberRange& range) {
  const std::string low = range.min ? format_number(*range.min) : "";
  const std::string high = range.max ? format_number(*range.max) : "";
  if (range.min && range.max) {
    return "must be in " + std::string(range.exclusive_min ? "(" : "[") + low + ", " + high +
           (range.exclusive_max ? ")" : "]");
  }
  if (range.min) return std::string("must be ") + (range.exclusive_min ? "> " : ">= ") + low;
  if (range.max) return std::string("must be ") + (range.exclusive_max ? "< " : "<= ") + high;
  return "must be a finite number";
}

// Finds the first member name that repeats within one object while a document is parsed, as a
// JSON pointer: nlohmann::json keeps the last of repeated names and would silently drop the others.
class RepeatedMemberFinder {
 public:
  bool operator()(int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (repeated_) return true;  // the first repeat is the one named
    switch (event) {
      case Event::object_start:
        levels_.push_back(Level{true});
        break;
      case Event::array_start:
        levels_.push_back(Level{false});
        break;
      case Event::key: {
        Level& level = levels_.back();
        const auto [name, fresh] = level.keys.insert(parsed.get_ref<const std::string&>());
        level.key = &*name;
        if (!fresh) repeated_ = pointer();
        break;
      }
      case Event::object_end:
      case Event::array_end:
        levels_.pop_back();
        element_done();
        break;
      case Event::value:
        element_done();
        break;
    }
    return true;
  }

  const std::optional<std::string>& repeated() const { return repeated_; }

 private:
  struct Level {
    bool object;
    std::set<std::string, std::less<>> keys{};
    const std::string* key = nullptr;  // the member being parsed, in an object: in `keys`
    std::size_t index = 0;             // of the element being parsed, in an array
  };

  void element_done() {
    if (!levels_.empty() && !levels_.back().object) ++levels_.back().index;
  }

  std::string pointer() const {
    std::string text;
    for (const Level& level : levels_) {
      text += "/" + (level.object ? escape_pointer_token(*level.key) : std::to_string(level.index));
    }
    return text;
  }

  std::vector<Level> levels_;
  std::optional<std::string> repeated_;
};

// At most this many unknown members are named in an error; the rest are counted.
constexpr std::size_t kNamedUnknownMembers = 5;

bool in_range(double value, const NumberRange& range) {
  if (!std::isfinite(value)) return false;
  if (range.min && (range.exclusive_min ? value <= *range.min : value < *range.min)) return false;
  if (range.max && (range.exclusive_max ? value >= *range.max : value > *range.max)) return false;
  return true;
}

std::string integer_rule(const IntegerRange& range) {
  const int64_t low = range.min.value_or(std::numeric_limits<int64_t>::min());
  const int64_t high = range.max.value_or(std::numeric_limits<int64_t>::max());
  return "must be an integer in [" + std::to_string(low) + ", " + std::to_string(high) + "]";
}

std::string one_of_rule(std::initializer_list<std::string_view> one_of) {
  std::string quoted;
  for (std::string_view allowed : one_of) {
    if (!quoted.empty()) quoted += ", ";
    quoted += nlohmann::json(allowed).dump();
  }
  return "must be one of " + quoted;
}

}  // namespace

Response BodyError::response() const { return problem(code, {}, detail, field); }

JsonBody::JsonBody(std::string_view text) {
  if (text.empty()) {
    fail(status::bad_request, "", "is empty; it must be a JSON object");
    return;
  }
  RepeatedMemberFinder finder;
  try {
    document_ = nlohmann::json::parse(text, std::ref(finder));
  } catch (const nlohmann::json::exception& error) {  // bad syntax, or a number beyond a double
    std::string_view message = error.what();
    message.remove_prefix(std::min(message.find("] ") + 2, message.size()));
    fail(status::bad_request, "", "is not valid JSON: " + std::string(message));
    return;
  }
  if (finder.repeated()) {
    fail(status::bad_request, *finder.repeated(), "appears more than once in its object");
  }
}

JsonObject JsonBody::root() {
  if (document_.is_object()) return open(document_, "");
  fail(status::bad_request, "", "must be a JSON object");  // unless the text was no JSON at all
  return open(empty_object(), "");
}

JsonObject JsonBody::open(const nlohmann::json& json, std::string pointer) {
  objects_.push_back(ReadObject{&json, std::move(pointer), {}});
  return JsonObject(*this, objects_.size() - 1);
}

void JsonBody::fail(status code, std::string pointer, std::string_view rule) {
  if (error_) return;
  std::string detail = (pointer.empty() ? "the body" : pointer) + ": " + std::string(rule);
  error_ = BodyError{code, std::move(pointer), std::move(detail)};
}

std::optional<BodyError> JsonBody::finish() const {
  if (error_) return error_;
  std::vector<std::string> named;  // the first kNamedUnknownMembers unknown members' pointers
  std::size_t unknown = 0;
  for (const ReadObject& object : objects_) {
    for (const auto& [key, value] : object.json->items()) {
      if (object.known.contains(key)) continue;
      if (++unknown <= kNamedUnknownMembers) {
        named.push_back(object.pointer + "/" + escape_pointer_token(key));
      }
    }
  }
  if (unknown == 0) return std::nullopt;
  std::string detail =
      unknown == 1 ? named.front() + ": unknown field" : "unknown fields: " + named.front();
  for (std::size_t i = 1; i < named.size(); ++i) detail += ", " + named[i];
  if (unknown > named.size()) detail += " and " + std::to_string(unknown - named.size()) + " more";
  return BodyError{status::bad_request, named.front(), std::move(detail)};
}

const std::string& JsonObject::pointer() const { return body_->objects_[index_].pointer; }

std::string JsonObject::pointer_to(std::string_view key) const {
  return pointer() + "/" + escape_pointer_token(key);
}

const nlohmann::json* JsonObject::member(std::string_view key, Presence presence) const {
  JsonBody::ReadObject& object = body_->objects_[index_];
  object.known.emplace(key);
  const auto found = object.json->find(key);
  if (found != object.json->end()) return &*found;
  if (presence == Presence::kRequired)
    body_->fail(status::bad_request, pointer_to(key), "is required");
  return nullptr;
}

void JsonObject::reject(std::string_view key, std::string rule) const {
  body_->fail(status::unprocessable_entity, pointer_to(key), rule);
}

std::optional<double> JsonObject::read_number(std::string_view key, Presence presence,
                                              const NumberRange& range) const {
  const nlohmann::json* value = member(key, presence);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number()) {
    body_->fail(status::bad_request, pointer_to(key), "must be a number");
    return std::nullopt;
  }
  const double number = value->get<double>();
  if (!in_range(number, range)) {
    body_->fail(status::unprocessable_entity, pointer_to(key), number_rule(range));
    return std::nullopt;
  }
  return number;
}

const nlohmann::json* JsonObject::integer_member(std::string_view key, Presence presence) const {
  const nlohmann::json* value = member(key, presence);
  if (value == nullptr || value->is_number_integer()) return value;
  body_->fail(status::bad_request, pointer_to(key), "must be an integer");
  return nullptr;
}

std::optional<int64_t> JsonObject::read_integer(std::string_view key, Presence presence,
                                                const IntegerRange& range) const {
  const nlohmann::json* value = integer_member(key, presence);
  if (value == nullptr) return std::nullopt;
  const bool fits = !value->is_number_unsigned() ||
                    value->get<uint64_t>() <= uint64_t{std::numeric_limits<int64_t>::max()};
  const int64_t integer = fits ? value->get<int64_t>() : 0;
  if (!fits || (range.min && integer < *range.min) || (range.max && integer > *range.max)) {
    body_->fail(status::unprocessable_entity, pointer_to(key), integer_rule(range));
    return std::nullopt;
  }
  return integer;
}

std::optional<uint64_t> JsonObject::unsigned_integer(std::string_view key) const {
  const nlohmann::json* value = integer_member(key, Presence::kRequired);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number_unsigned() && value->get<int64_t>() < 0) {
    body_->fail(
        status::unprocessable_entity, pointer_to(key),
        "must be an integer in [0, " + std::to_string(std::numeric_limits<uint64_t>::max()) + "]");
    return std::nullopt;
  }
  return value->get<uint64_t>();
}

std::optional<std::string> JsonObject::read_string(
    std::string_view key, Presence presence, std::initializer_list<std::string_view> one_of) const {
  const nlohmann::json* value = member(key, presence);
  if (value == nullptr) return std::nullopt;
  if (!value->is_string()) {
    body_->fail(status::bad_request, pointer_to(key), "must be a string");
    return std::nullopt;
  }
  const auto& text = value->get_ref<const std::string&>();
  if (one_of.size() != 0 && std::find(one_of.begin(), one_of.end(), text) == one_of.end()) {
    body_->fail(status::unprocessable_entity, pointer_to(key), one_of_rule(one_of));
    return std::nullopt;
  }
  return text;
}

std::optional<bool> JsonObject::read_boolean(std::string_view key, Presence presence) const {
  const nlohmann::json* value = member(key, presence);
  if (value == nullptr) return std::nullopt;
  if (!value->is_boolean()) {
    body_->fail(status::bad_request, pointer_to(key), "must be true or false");
    return std::nullopt;
  }
  return value->get<bool>();
}

std::optional<JsonObject> JsonObject::read_object(std::string_view key, Presence presence) const {
  const nlohmann::json* value = member(key, presence);
  if (value == nullptr) return std::nullopt;
  if (!value->is_object()) {
    body_->fail(status::bad_request, pointer_to(key), "must be an object");
    return std::nullopt;
  }
  return body_->open(*value, pointer_to(key));
}

std::optional<std::vector<JsonObject>> JsonObject::read_objects(std::string_view key,
                                                                Presence presence) const {
  const nlohmann::json* value = member(key, presence);
  if (value == nullptr) return std::nullopt;
  if (!value->is_array()) {
    body_->fail(status::bad_request, pointer_to(key), "must be an array of objects");
    return std::nullopt;
  }
  std::vector<JsonObject> objects;
  const std::string array_pointer = pointer_to(key);
  for (std::size_t i = 0; i < value->size(); ++i) {
    const std::string element_pointer = array_pointer + "/" + std::to_string(i);
    if (!(*value)[i].is_object()) {
      body_->fail(status::bad_request, element_pointer, "must be an object");
      return std::nullopt;
    }
    objects.push_back(body_->open((*value)[i], element_pointer));
  }
  return objects;
}

std::optional<std::vector<std::string>> JsonObject::optional_strings(std::string_view key) const {
  const nlohmann::json* value = member(key, Presence::kOptional);
  if (value == nullptr) return std::nullopt;
  if (!value->is_array()) {
    body_->fail(status::bad_request, pointer_to(key), "must be an array of strings");
    return std::nullopt;
  }
  std::vector<std::string> strings;
  for (std::size_t i = 0; i < value->size(); ++i) {
    if (!(*value)[i].is_string()) {
      body_->fail(status::bad_request, pointer_to(key) + "/" + std::to_string(i),
                  "must be a string");
      return std::nullopt;
    }
    strings.push_back((*value)[i].get<std::string>());
  }
  return strings;
}

bool JsonObject::is_null(std::string_view key) const {
  const nlohmann::json* value = member(key, Presence::kOptional);
  return value != nullptr && value->is_null();
}

std::optional<double> JsonObject::number(std::string_view key, const NumberRange& range) const {
  return read_number(key, Presence::kRequired, range);
}
std::optional<double> JsonObject::optional_number(std::string_view key,
                                                  const NumberRange& range) const {
  return read_number(key, Presence::kOptional, range);
}
std::optional<int64_t> JsonObject::integer(std::string_view key, const IntegerRange& range) const {
  return read_integer(key, Presence::kRequired, range);
}
std::optional<int64_t> JsonObject::optional_integer(std::string_view key,
                                                    const IntegerRange& range) const {
  return read_integer(key, Presence::kOptional, range);
}
std::optional<std::string> JsonObject::string(
    std::string_view key, std::initializer_list<std::string_view> one_of) const {
  return read_string(key, Presence::kRequired, one_of);
}
std::optional<std::string> JsonObject::optional_string(
    std::string_view key, std::initializer_list<std::string_view> one_of) const {
  return read_string(key, Presence::kOptional, one_of);
}
std::optional<bool> JsonObject::boolean(std::string_view key) const {
  return read_boolean(key, Presence::kRequired);
}
std::optional<bool> JsonObject::optional_boolean(std::string_view key) const {
  return read_boolean(key, Presence::kOptional);
}
std::optional<JsonObject> JsonObject::object(std::string_view key) const {
  return read_object(key, Presence::kRequired);
}
std::optional<JsonObject> JsonObject::optional_object(std::string_view key) const {
  return read_object(key, Presence::kOptional);
}
std::optional<std::vector<JsonObject>> JsonObject::objects(std::string_view key) const {
  return read_objects(key, Presence::kRequired);
}
std::optional<std::vector<JsonObject>> JsonObject::optional_objects(std::string_view key) const {
  return read_objects(key, Presence::kOptional);
}

}  // namespace gradgate::http
