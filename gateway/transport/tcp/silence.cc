#include "gateway/transport/tcp/silence.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace gradgate::gateway::tcp {

Status limit_unacknowledged(boost::asio::ip::tcp::socket& socket, std::chrono::milliseconds limit) {
  const auto user_timeout = static_cast<unsigned>(std::min<long long>(limit.count(), 0x7fffffff));
  if (::setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout,
                   sizeof user_timeout) != 0) {
    return Status(ErrorCode::kUnavailable,
                  std::string("setsockopt TCP_USER_TIMEOUT: ") + std::strerror(errno));
  }
  return {};
}

}  // namespace gradgate::gateway::tcp
