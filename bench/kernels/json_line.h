// One JSON object on one line, written by hand so that the kernel benchmark builds with nothing
// but the compilers: keys in the order they are added, strings escaped, numbers in their shortest
// round-trip form, non-finite numbers and absent values as null.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace gradgate::bench {

class JsonLine {
 public:
  JsonLine& text(std::string_view key, std::string_view value) {
    open(key);
    quote(value);
    return *this;
  }
  JsonLine& number(std::string_view key, double value) {
    open(key);
    if (!std::isfinite(value)) {
      body_ += "null";
      return *this;
    }
    char digits[32];
    const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
    body_.append(digits, end);
    return *this;
  }
  JsonLine& number(std::string_view key, std::optional<double> value) {
    if (value) return number(key, *value);
    open(key);
    body_ += "null";
    return *this;
  }
  JsonLine& count(std::string_view key, uint64_t value) {
    open(key);
    body_ += std::to_string(value);
    return *this;
  }

  /// Appends the fields of `other`, in their order.
  JsonLine& append(const JsonLine& other) {
    if (!other.body_.empty()) {
      if (!body_.empty()) body_ += ',';
      body_ += other.body_;
    }
    return *this;
  }

  /// The object: {"key":value,...}.
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void open(std::string_view key) {
    if (!body_.empty()) body_ += ',';
    quote(key);
    body_ += ':';
  }
  void quote(std::string_view s) {
    body_ += '"';
    for (const char c : s) {
      if (c == '"' || c == '\\') {
        body_ += '\\';
        body_ += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char escaped[8];
        std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
        body_ += escaped;
      } else {
        body_ += c;
      }
    }
    body_ += '"';
  }

  std::string body_;
};

}  // namespace gradgate::bench
