#include "gateway/ingress/unix_listener.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gradgate::gateway {
namespace {

Status errno_status(ErrorCode code, const std::string& what) {
  return Status(code, what + ": " + std::strerror(errno));
}

/// Removes a socket file that no server answers on.
Status remove_stale_socket(const std::string& path, const sockaddr_un& address) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::ok_status();
    return errno_status(ErrorCode::kInvalidArgument, "ingress socket \"" + path + "\": lstat");
  }
  if (!S_ISSOCK(st.st_mode)) {
    return Status(ErrorCode::kInvalidArgument,
                  "ingress socket \"" + path + "\": the path exists and is not a socket");
  }
  // Non-blocking: a live gateway whose listen queue is full answers EAGAIN instead of blocking.
  const int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (probe < 0) return errno_status(ErrorCode::kResourceExhausted, "socket");
  const int connected = connect(probe, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  const int error = connected == 0 ? 0 : errno;
  close(probe);
  const std::string where = "ingress socket \"" + path + "\": ";
  if (connected == 0 || error == EAGAIN) {
    return Status(ErrorCode::kUnavailable, where + "another gateway is listening there");
  }
  // Only a socket nobody listens on is stale. Another program's socket (of another type, or
  // one this gateway may not connect to) is left alone.
  if (error != ECONNREFUSED) {
    return Status(ErrorCode::kUnavailable,
                  where + "the path holds a socket that is not a stale gateway's (connect: " +
                      std::strerror(error) + "); remove it or choose another ingress.socket");
  }
  if (unlink(path.c_str()) != 0) {
    return errno_status(ErrorCode::kUnavailable,
                        "ingress socket \"" + path + "\": removing the stale socket");
  }
  return Status::ok_status();
}

}  // namespace

Result<int> listen_unix_seqpacket(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof address.sun_path) {
    return Status(ErrorCode::kInvalidArgument,
                  "ingress socket \"" + path + "\": the path must have 1 to " +
                      std::to_string(sizeof address.sun_path - 1) + " bytes");
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  GRADGATE_RETURN_IF_ERROR(remove_stale_socket(path, address));

  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return errno_status(ErrorCode::kResourceExhausted, "socket");
  const std::string where = "ingress socket \"" + path + "\"";
  if (bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    Status status = errno_status(ErrorCode::kUnavailable, where + ": bind");
    close(fd);
    return status;
  }
  if (chmod(path.c_str(), 0660) != 0 || listen(fd, SOMAXCONN) != 0) {
    Status status = errno_status(ErrorCode::kUnavailable, where + ": chmod/listen");
    close(fd);
    unlink(path.c_str());
    return status;
  }
  return fd;
}

}  // namespace gradgate::gateway
