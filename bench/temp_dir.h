// A temporary directory for a bench's files (configs, logs, results): made under the system's
// temporary directory when constructed, removed with its contents when destroyed.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace gradgate::bench {

class TempDir {
 public:
  /// `prefix`: the start of the directory's name ("gradgate-job"). Throws std::runtime_error.
  explicit TempDir(const std::string& prefix)
      : path_((std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string()) {
    if (mkdtemp(path_.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace gradgate::bench
