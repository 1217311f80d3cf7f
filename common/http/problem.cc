#include "common/http/problem.h"

#include <nlohmann/json.hpp>

namespace gradgate::http {

Response problem(status code, std::string title, std::string detail, std::string field) {
  if (title.empty()) title = boost::beast::http::obsolete_reason(code);
  nlohmann::json body = {{"type", "about:blank"},
                         {"title", std::move(title)},
                         {"status", static_cast<unsigned>(code)},
                         {"detail", std::move(detail)}};
  if (!field.empty()) body["field"] = std::move(field);
  return Response{
      .code = code, .content_type = std::string(kProblemContentType), .body = to_json_text(body)};
}

Response handler_failed() {
  return problem(status::internal_server_error, {},
                 "the server failed to handle this request; its log says why");
}

}  // namespace gradgate::http
