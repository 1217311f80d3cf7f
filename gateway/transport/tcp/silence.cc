#include "gateway/transport/tcp/silence.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace gradgate::gateway::tcp {

Status limit_silence(boost::asio::ip::tcp::socket& socket, std::chrono::milliseconds limit) {
  const int fd = socket.native_handle();
  // Probes from the first idle second on, one a second, as many as fit the limit: the limit, not
  // the count, decides when the connection closes (tcp(7), TCP_USER_TIMEOUT).
  const int on = 1;
  const int probe_seconds = 1;
  const int probes = static_cast<int>(std::clamp<long long>(limit.count() / 1000, 1, 127));
  const auto user_timeout = static_cast<unsigned>(std::min<long long>(limit.count(), 0x7fffffff));
  const struct {
    int level, name;
    const void* value;
    socklen_t size;
    const char* what;
  } options[] = {
      {SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on, "SO_KEEPALIVE"},
      {IPPROTO_TCP, TCP_KEEPIDLE, &probe_seconds, sizeof probe_seconds, "TCP_KEEPIDLE"},
      {IPPROTO_TCP, TCP_KEEPINTVL, &probe_seconds, sizeof probe_seconds, "TCP_KEEPINTVL"},
      {IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes, "TCP_KEEPCNT"},
      {IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout, "TCP_USER_TIMEOUT"},
  };
  for (const auto& option : options) {
    if (::setsockopt(fd, option.level, option.name, option.value, option.size) != 0) {
      return Status(ErrorCode::kUnavailable,
                    std::string("setsockopt ") + option.what + ": " + std::strerror(errno));
    }
  }
  return {};
}

}  // namespace gradgate::gateway::tcp
