#include "common/http/target.h"

#include <optional>

namespace gradgate::http {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space) {
  std::string decoded;
  decoded.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      const int high = hex_value(text[i + 1]);
      const int low = hex_value(text[i + 2]);
      if (high < 0 || low < 0) return std::nullopt;
      decoded.push_back(static_cast<char>(high * 16 + low));
      i += 2;
    } else {
      decoded.push_back(plus_is_space && text[i] == '+' ? ' ' : text[i]);
    }
  }
  return decoded;
}

Status bad_encoding(std::string_view part) {
  return Status(ErrorCode::kInvalidArgument,
                "malformed percent-encoding in the request target: '" + std::string(part) + "'");
}

}  // namespace

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> segments;
  for (std::string_view rest = path.substr(1); path != "/";) {
    const std::size_t slash = rest.find('/');
    segments.push_back(rest.substr(0, slash));
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  return segments;
}

Result<Target> parse_target(std::string_view target) {
  if (target.empty() || target.front() != '/') {
    return Status(ErrorCode::kInvalidArgument,
                  "the request target must be a path starting with '/'");
  }
  Target parsed;
  const std::size_t question = target.find('?');
  parsed.path = target.substr(0, question);
  for (std::string_view segment : split_path(parsed.path)) {
    auto decoded = percent_decode(segment, false);
    if (!decoded) return bad_encoding(segment);
    parsed.segments.push_back(std::move(*decoded));
  }
  if (question == std::string_view::npos) return parsed;
  for (std::string_view rest = target.substr(question + 1); !rest.empty();) {
    const std::size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    if (!pair.empty()) {
      const std::size_t equals = pair.find('=');
      auto key = percent_decode(pair.substr(0, equals), true);
      auto value = percent_decode(
          equals == std::string_view::npos ? std::string_view{} : pair.substr(equals + 1), true);
      if (!key || !value) return bad_encoding(pair);
      parsed.query.insert_or_assign(std::move(*key), std::move(*value));
    }
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return parsed;
}

}  // namespace gradgate::http
