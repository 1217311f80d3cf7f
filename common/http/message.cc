#include "common/http/message.h"

#include <nlohmann/json.hpp>

namespace gradgate::http {

std::string_view Request::path_parameter(std::string_view name) const {
  const auto found = path_parameters_.find(name);
  return found == path_parameters_.end() ? std::string_view{} : std::string_view{found->second};
}

std::string_view Request::header(std::string_view name) const {
  const auto found = message_.find(name);
  return found == message_.end() ? std::string_view{} : found->value();
}

std::string to_json_text(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Response json_response(const nlohmann::json& body, status code) {
  return Response{
      .code = code, .content_type = std::string(kJsonContentType), .body = to_json_text(body)};
}

}  // namespace gradgate::http
