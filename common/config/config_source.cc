#include "common/config/config_source.h"

#include <yaml-cpp/depthguard.h>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gradgate::config {

Result<std::string> read_config_file(const std::string& path, std::string_view what) {
  const std::string named = std::string(what) + " \"" + path + "\"";
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    return Status(ErrorCode::kNotFound, named + " does not exist");
  }
  if (!std::filesystem::is_regular_file(path, error)) {
    return Status(ErrorCode::kInvalidArgument, named + " is not a file");
  }
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  if (!file) {
    return Status(ErrorCode::kInvalidArgument, named + " cannot be read: " + std::strerror(errno));
  }
  return text.str();
}

std::map<std::string, std::string> process_environment() {
  std::map<std::string, std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const auto equals = text.find('=');
    if (equals == std::string_view::npos) continue;
    env.emplace(text.substr(0, equals), text.substr(equals + 1));
  }
  return env;
}

std::string yaml_location(const YAML::Mark& mark) {
  if (mark.is_null()) return "";
  return " (line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1) +
         ")";
}

std::string invalid_yaml(const YAML::Exception& error) {
  if (const auto* deep = dynamic_cast<const YAML::DeepRecursion*>(&error)) {
    return "invalid YAML: nested more than " + std::to_string(deep->depth()) +
           " levels deep, beyond what the YAML reader takes" + yaml_location(error.mark);
  }
  return "invalid YAML: " + error.msg + yaml_location(error.mark);
}

void for_each_set_override(
    const std::vector<std::string>& overrides, ConfigErrors& errors,
    const std::function<void(const std::string& origin, const std::string& path,
                             std::string_view value)>& apply) {
  for (const auto& text : overrides) {
    const std::string origin = "--set \"" + text + "\"";
    const auto equals = text.find('=');
    if (equals == std::string::npos) {
      errors.add_general(origin, "expected section.key=value");
      continue;
    }
    apply(origin, text.substr(0, equals), std::string_view(text).substr(equals + 1));
  }
}

}  // namespace gradgate::config
