// Error values for the data path: every fallible call returns a Status or a Result<T> that says
// what went wrong and where. No exceptions cross these interfaces, so the gateway can handle a
// malformed frame or a bad gradient without unwinding a collective.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace gradgate {

enum class ErrorCode : uint8_t {
  kOk = 0,
  kInvalidArgument,    // the caller's input is unusable (sizes, parameters)
  kMalformedFrame,     // a frame's bytes break the wire format (lengths, indices, values)
  kChecksumMismatch,   // the frame's CRC32C does not match its bytes
  kIncompatible,       // two frames (or a frame and a stream) that cannot be combined
  kUnsupported,        // the operation does not exist for this codec or memory kind
  kResourceExhausted,  // an output buffer or memory cap is too small
  kUnavailable,        // a peer or service is not reachable now; trying again later may work
  kTimeout,            // a deadline passed before the operation finished
  kAborted,            // the operation was cancelled (shutdown, a participant left)
  kNotFound,           // a named thing (tensor, session, peer) does not exist
  kInternal,           // a broken invariant: a bug
  kNonFiniteGradient,  // a gradient to encode holds NaN or infinite values (nothing was encoded)
};

/// Stable lower-case name of an error code, for logs and the `kind` label of error metrics.
std::string_view error_code_name(ErrorCode code);

/// The outcome of an operation: ok, or an error code with a human-readable message.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return {}; }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "code: message", or "ok".
  std::string to_string() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

/// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : state_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T& value() & { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }
  /// The error; an ok Status when a value is held.
  Status status() const { return ok() ? Status{} : std::get<Status>(state_); }

 private:
  std::variant<T, Status> state_;
};

}  // namespace gradgate

/// Returns the Status of `expr` from the enclosing function when it is an error.
#define GRADGATE_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    ::gradgate::Status gradgate_status_ = (expr);        \
    if (!gradgate_status_.ok()) return gradgate_status_; \
  } while (0)
