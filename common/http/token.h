// Bearer-token authentication of mutating REST calls: the check the server applies to routes that
// require a token, and where the expected token comes from (a file, e.g. a mounted Kubernetes
// Secret, or an environment variable).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "gradgate/base/status.h"

namespace gradgate::http {

/// The expected bearer token. Empty (the default) disables authentication: every request passes.
/// Immutable, so safe to share between threads.
class TokenCheck {
 public:
  enum class Verdict {
    kAllowed,
    kMissing,     // no Authorization header: 401
    kNotBearer,   // an Authorization header that is not "Bearer <token>": 401
    kWrongToken,  // a bearer token that is not the expected one: 403
  };

  TokenCheck() = default;
  explicit TokenCheck(std::string expected) : expected_(std::move(expected)) {}

  bool enabled() const { return !expected_.empty(); }
  /// Judges the value of a request's Authorization header (empty when absent). The comparison
  /// takes a time that depends only on the length of the presented token.
  Verdict check(std::string_view authorization) const;

 private:
  std::string expected_;
};

/// Reads the token from `file` when it is not empty (the file wins; its trailing whitespace and
/// newline are trimmed), else from the environment variable `env_var`. Errors name the file or the
/// variable: kNotFound when the variable is unset, kInvalidArgument when the file cannot be read
/// or the token is empty or holds whitespace or control characters.
Result<std::string> load_token(const std::filesystem::path& file, const std::string& env_var);
/// load_token, except that no file and an unset (or unnamed) variable give "" (no token):
/// authentication off on a server, no Authorization header on a client.
Result<std::string> load_optional_token(const std::filesystem::path& file,
                                        const std::string& env_var);

}  // namespace gradgate::http
