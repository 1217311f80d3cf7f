// The request a route handler sees and the response it returns. Plain values, so that a handler
// is an ordinary function of a Request; the server turns the Response into HTTP.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/verb.hpp>
#include <functional>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gradgate::http {

using boost::beast::http::status;
using boost::beast::http::verb;

/// Query or path parameters by name, percent-decoded.
using Parameters = std::map<std::string, std::string, std::less<>>;

/// One request as the handler sees it. A view: valid only during the handler call.
class Request {
 public:
  using Message = boost::beast::http::request<boost::beast::http::string_body>;

  Request(const Message& message, std::string_view path, const Parameters& query,
          const Parameters& path_parameters)
      : message_(message), path_(path), query_(query), path_parameters_(path_parameters) {}

  verb method() const { return message_.method(); }
  /// The path as sent (not decoded), without the query: "/v1/jobs/a%20b".
  std::string_view path() const { return path_; }
  /// The query parameters; a key given twice keeps its last value.
  const Parameters& query() const { return query_; }
  /// The value of a `{name}` segment of the route's pattern; empty when the pattern has none.
  std::string_view path_parameter(std::string_view name) const;
  /// The value of a header (names are case-insensitive); empty when absent.
  std::string_view header(std::string_view name) const;
  const std::string& body() const { return message_.body(); }

 private:
  const Message& message_;
  std::string_view path_;
  const Parameters& query_;
  const Parameters& path_parameters_;
};

inline constexpr std::string_view kJsonContentType = "application/json";

/// What a handler answers. `headers` are added as given (Content-Type comes from `content_type`).
struct Response {
  status code = status::ok;
  std::string content_type{kJsonContentType};
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers{};
};

/// `value` as compact JSON text; invalid UTF-8 in strings (say, echoed from a request) is replaced
/// by U+FFFD instead of failing.
std::string to_json_text(const nlohmann::json& value);

/// A JSON response: `body` serialised, content type application/json.
Response json_response(const nlohmann::json& body, status code = status::ok);

/// What a route does with a request. Runs on the server's I/O thread: it must not block for long.
/// An exception that escapes it becomes a 500 problem response.
using Handler = std::function<Response(const Request&)>;

}  // namespace gradgate::http
