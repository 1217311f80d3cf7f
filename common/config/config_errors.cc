#include "common/config/config_errors.h"

#include <utility>

namespace gradgate::config {

void ConfigErrors::add(std::string_view origin, std::string_view key_path,
                       std::string_view message) {
  failed_keys_.emplace(key_path.substr(0, key_path.find('[')));
  add_line(std::string(origin) + ": " + std::string(key_path) + ": " + std::string(message));
}

void ConfigErrors::add_general(std::string_view origin, std::string_view message) {
  add_line(std::string(origin) + ": " + std::string(message));
}

void ConfigErrors::add_unreadable(std::string_view origin, std::string_view message) {
  nothing_read_ = true;
  add_general(origin, message);
}

void ConfigErrors::add_line(std::string line) { lines_.push_back(std::move(line)); }

bool ConfigErrors::failed(std::string_view key) const {
  return nothing_read_ || failed_keys_.contains(key);
}

std::string ConfigErrors::joined() const {
  std::string text;
  for (const auto& line : lines_) {
    if (!text.empty()) text += '\n';
    text += line;
  }
  return text;
}

}  // namespace gradgate::config
