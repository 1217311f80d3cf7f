#include "common/http/token.h"

#include <algorithm>
#include <boost/beast/core/string.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace gradgate::http {
namespace {

constexpr std::string_view kBearer = "bearer";

bool is_token_character(char c) { return c > ' ' && c != '\x7f'; }

// Equal when `presented` equals `expected` (not empty); the loop runs over `presented` only, so
// its time reveals nothing about the expected token.
bool constant_time_equal(std::string_view presented, std::string_view expected) {
  unsigned difference = presented.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < presented.size(); ++i) {
    difference |= static_cast<unsigned char>(presented[i]) ^
                  static_cast<unsigned char>(expected[i % expected.size()]);
  }
  return difference == 0;
}

Result<std::string> checked_token(std::string token, const std::string& source) {
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ' ||
                            token.back() == '\t')) {
    token.pop_back();
  }
  if (token.empty())
    return Status(ErrorCode::kInvalidArgument, "the token in " + source + " is empty");
  if (!std::all_of(token.begin(), token.end(), is_token_character)) {
    return Status(ErrorCode::kInvalidArgument,
                  "the token in " + source + " holds whitespace or control characters");
  }
  return token;
}

}  // namespace

TokenCheck::Verdict TokenCheck::check(std::string_view authorization) const {
  if (!enabled()) return Verdict::kAllowed;
  if (authorization.empty()) return Verdict::kMissing;
  const std::size_t space = authorization.find(' ');
  if (space == std::string_view::npos ||
      !boost::beast::iequals(authorization.substr(0, space), kBearer)) {
    return Verdict::kNotBearer;
  }
  std::string_view token = authorization.substr(space + 1);
  token.remove_prefix(std::min(token.find_first_not_of(' '), token.size()));
  if (token.empty()) return Verdict::kNotBearer;
  return constant_time_equal(token, expected_) ? Verdict::kAllowed : Verdict::kWrongToken;
}

Result<std::string> load_token(const std::filesystem::path& file, const std::string& env_var) {
  if (!file.empty()) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      return Status(ErrorCode::kInvalidArgument,
                    "cannot read the token file '" + file.string() + "'");
    }
    std::ostringstream text;
    text << in.rdbuf();
    return checked_token(std::move(text).str(), "file '" + file.string() + "'");
  }
  const char* value = std::getenv(env_var.c_str());
  if (value == nullptr) {
    return Status(ErrorCode::kNotFound,
                  "no token: the environment variable " + env_var + " is not set");
  }
  return checked_token(value, "the environment variable " + env_var);
}

Result<std::string> load_optional_token(const std::filesystem::path& file,
                                        const std::string& env_var) {
  if (file.empty() && (env_var.empty() || std::getenv(env_var.c_str()) == nullptr)) {
    return std::string();
  }
  return load_token(file, env_var);
}

}  // namespace gradgate::http
