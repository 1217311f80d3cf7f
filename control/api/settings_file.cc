#include "control/api/settings_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

#include "control/api/settings_json.h"

namespace gradgate::control {
namespace {

// `error` is the errno of the failed call, taken before anything else could change it.
Status unavailable(int error, const std::string& what, const std::string& path) {
  return Status(ErrorCode::kUnavailable, what + " " + path + ": " + std::strerror(error));
}

// Writes all of `text` to `fd`, retrying short writes; 0 or the errno of the failure.
int write_all(int fd, const std::string& text) {
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    written += static_cast<size_t>(n);
  }
  return 0;
}

// Flushes `fd` to the disk and closes it; 0 or the errno of the first failure.
int sync_and_close(int fd) {
  const int synced = ::fsync(fd) == 0 ? 0 : errno;
  const int closed = ::close(fd) == 0 ? 0 : errno;
  return synced != 0 ? synced : closed;
}

}  // namespace

Result<std::optional<PolicySettings>> load_settings_file(const std::string& path,
                                                         const PolicySettings& defaults) {
  std::error_code absent;
  if (!std::filesystem::exists(path, absent) && !absent) return std::optional<PolicySettings>();
  std::ifstream in(path);
  if (!in) return unavailable(errno, "cannot read", path);
  std::ostringstream text;
  text << in.rdbuf();
  PolicySettings settings;
  if (auto error = read_settings(text.str(), defaults, settings)) {
    return Status(ErrorCode::kInvalidArgument, path + ": " + error->detail);
  }
  return std::optional<PolicySettings>(std::move(settings));
}

Result<std::optional<PolicySettings>> stored_settings(const ControlConfig& config) {
  if (config.settings_file.empty()) return std::optional<PolicySettings>();
  auto stored = load_settings_file(config.settings_file, config.policy);
  if (!stored.ok() || !*stored) return stored;
  if (auto policy = make_policy(**stored); !policy.ok()) {
    return Status(policy.status().code(), config.settings_file + ": " + policy.status().message());
  }
  return stored;
}

Status save_settings_file(const std::string& path, const PolicySettings& settings) {
  const std::string temporary = path + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return unavailable(errno, "cannot create", temporary);
  int error = write_all(fd, settings_json(settings).dump(2) + "\n");
  const int closed = sync_and_close(fd);
  if (error == 0) error = closed;
  if (error == 0 && std::rename(temporary.c_str(), path.c_str()) != 0) {
    error = errno;
    std::remove(temporary.c_str());
    return unavailable(error, "cannot rename " + temporary + " to", path);
  }
  if (error != 0) {
    std::remove(temporary.c_str());
    return unavailable(error, "cannot write", temporary);
  }
  // The rename is durable once the directory is on the disk too. The new file is in place
  // whatever happens now, so a failure here is only logged: the settings are saved.
  const std::string directory = std::filesystem::path(path).parent_path().string();
  const int dir =
      ::open(directory.empty() ? "." : directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const int synced = dir < 0 ? errno : sync_and_close(dir);
  if (synced != 0) {
    spdlog::warn("{}: saved, but its directory could not be flushed to the disk: {}", path,
                 std::strerror(synced));
  }
  return {};
}

}  // namespace gradgate::control
