#include "control/api/settings_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "control/api/settings_json.h"

namespace gradgate::control {
namespace {

Status unavailable(const std::string& what, const std::string& path) {
  return Status(ErrorCode::kUnavailable, what + " " + path + ": " + std::strerror(errno));
}

// Writes all of `text` to `fd`, retrying short writes.
bool write_all(int fd, const std::string& text) {
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    written += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

Result<std::optional<PolicySettings>> load_settings_file(const std::string& path,
                                                         const PolicySettings& defaults) {
  std::error_code absent;
  if (!std::filesystem::exists(path, absent) && !absent) return std::optional<PolicySettings>();
  std::ifstream in(path);
  if (!in) return unavailable("cannot read", path);
  std::ostringstream text;
  text << in.rdbuf();
  PolicySettings settings;
  if (auto error = read_settings(text.str(), defaults, settings)) {
    return Status(ErrorCode::kInvalidArgument, path + ": " + error->detail);
  }
  return std::optional<PolicySettings>(std::move(settings));
}

Status save_settings_file(const std::string& path, const PolicySettings& settings) {
  const std::string temporary = path + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return unavailable("cannot create", temporary);
  const bool written = write_all(fd, settings_json(settings).dump(2) + "\n") && ::fsync(fd) == 0;
  const Status failed = written ? Status() : unavailable("cannot write", temporary);
  ::close(fd);
  if (!failed.ok()) {
    std::remove(temporary.c_str());
    return failed;
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const Status renamed = unavailable("cannot rename " + temporary + " to", path);
    std::remove(temporary.c_str());
    return renamed;
  }
  return {};
}

}  // namespace gradgate::control
