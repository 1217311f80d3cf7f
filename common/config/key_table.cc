#include "common/config/key_table.h"

namespace gradgate::config {
namespace {

constexpr std::string_view kEnvPrefix = "GRADGATE_";

}  // namespace

std::string env_name(std::string_view path) {
  std::string name(kEnvPrefix);
  for (const char c : path) {
    name += c == '.' ? '_' : (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  }
  return name;
}

std::string env_key_path(std::string_view name, std::span<const std::string_view> sections) {
  if (!name.starts_with(kEnvPrefix)) return "";
  const std::string_view rest = name.substr(kEnvPrefix.size());
  for (const std::string_view section : sections) {
    const std::string section_env = env_name(section).substr(kEnvPrefix.size()) + "_";
    if (!rest.starts_with(section_env)) continue;
    std::string path = std::string(section) + ".";
    for (const char c : rest.substr(section_env.size())) {
      path += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    }
    return path;
  }
  return "";
}

}  // namespace gradgate::config
