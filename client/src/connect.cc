// gg_connect, gg_connect_wait, gg_job, gg_collective_timeout, gg_close: the lifetime of a
// connection to the gateway.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <string>
#include <thread>

#include "client_state.h"
#include "error.h"
#include "gradgate/ingress_protocol.h"

namespace proto = gradgate::ingress_protocol;
using gradgate::client_impl::fail;
using gradgate::client_impl::quoted;

namespace {

using gradgate::client_impl::kControlTimeoutMs;

// Whether a failed connect(2) means that the gateway is not there yet, or not ready: no socket
// file, or one that nobody listens on (a gateway starting, or restarting after it stopped), a
// full listen queue (a gateway that is not accepting for the moment), a signal.
bool gateway_not_there_yet(int error) {
  return error == ENOENT || error == ECONNREFUSED || error == EAGAIN || error == EINTR;
}

// Connects without blocking: a gateway whose listen queue is full answers EAGAIN at once instead
// of holding the caller. The socket is blocking again on success (the reader thread blocks on
// it). Returns the socket, or -errno.
int connect_socket(const sockaddr_un& address) {
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    // A Unix socket connects at once or not at once: EINPROGRESS is taken as not ready.
    const int error = errno == EINPROGRESS ? EAGAIN : errno;
    close(fd);
    return -error;
  }
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int error = errno;
    close(fd);
    return -error;
  }
  return fd;
}

// One attempt of gg_connect, its HELLO answered within `hello_timeout_ms`. `worth_retrying`
// tells gg_connect_wait whether another attempt may succeed: the gateway is not there yet or
// closed the connection before answering (it was stopping), or the rank is still in use.
gg_status connect_once(const char* socket_path, uint32_t local_rank, int hello_timeout_ms,
                       gg_client** out, bool& worth_retrying) {
  worth_retrying = false;
  const std::string what = "gg_connect(" + quoted(socket_path) + ")";
  if (out == nullptr) return fail(GG_INVALID_ARGUMENT, what + ": null output pointer");
  *out = nullptr;
  if (socket_path == nullptr || socket_path[0] == '\0') {
    return fail(GG_INVALID_ARGUMENT, what + ": null or empty socket path");
  }
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (std::strlen(socket_path) >= sizeof address.sun_path) {
    return fail(GG_INVALID_ARGUMENT, what + ": socket path longer than " +
                                         std::to_string(sizeof address.sun_path - 1) + " bytes");
  }
  std::strcpy(address.sun_path, socket_path);

  const int fd = connect_socket(address);
  if (fd < 0) {
    worth_retrying = gateway_not_there_yet(-fd);
    return fail(GG_CONNECT_FAILED, what + ": connect: " + std::strerror(-fd));
  }
  auto* client = new gg_client;
  client->socket_path = socket_path;
  client->local_rank = local_rank;
  client->fd = fd;
  try {
    client->reader = std::thread(gradgate::client_impl::read_replies, client);
  } catch (const std::exception& e) {
    gradgate::client_impl::destroy(client);
    return fail(GG_INTERNAL, what + ": cannot start the reader thread: " + e.what());
  }

  uint64_t id = 0;
  std::shared_ptr<gradgate::client_impl::Reply> reply;
  {
    std::lock_guard lock(client->mu);
    std::tie(id, reply) = gradgate::client_impl::add_pending(*client);
  }
  const auto packet = proto::encode(id, proto::Hello{local_rank});
  const gg_status status = gradgate::client_impl::round_trip(*client, id, reply, packet, -1,
                                                             hello_timeout_ms, what + ": hello");
  if (status != GG_OK) {
    const std::string message = gg_last_error();
    gradgate::client_impl::destroy(client);
    worth_retrying = status == GG_RANK_IN_USE || status == GG_CLOSED;
    return fail(status, message);
  }
  client->job = reply->job;
  client->collective_timeout_ms = reply->collective_timeout_ms;
  *out = client;
  return GG_OK;
}

}  // namespace

extern "C" gg_status gg_connect(const char* socket_path, uint32_t local_rank, gg_client** out) {
  bool worth_retrying = false;
  return connect_once(socket_path, local_rank, kControlTimeoutMs, out, worth_retrying);
}

extern "C" gg_status gg_connect_wait(const char* socket_path, uint32_t local_rank,
                                     uint32_t timeout_ms, gg_client** out) {
  using Clock = std::chrono::steady_clock;
  using std::chrono::milliseconds;
  constexpr auto kFirstPause = milliseconds(10);
  constexpr auto kLongestPause = milliseconds(1000);
  const auto start = Clock::now();
  const auto deadline = start + milliseconds(timeout_ms);
  auto pause = std::chrono::duration_cast<Clock::duration>(kFirstPause);
  gg_status last_status = GG_OK;  // the last failure worth retrying, and its message
  std::string last_failure;
  for (int attempts = 1;; ++attempts) {
    // The HELLO waits for the time left (at least 1 ms), never beyond a control request's time.
    const auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now()).count();
    const int hello_timeout_ms = static_cast<int>(std::clamp<int64_t>(left, 1, kControlTimeoutMs));
    bool worth_retrying = false;
    const gg_status status =
        connect_once(socket_path, local_rank, hello_timeout_ms, out, worth_retrying);
    const auto now = Clock::now();
    if (status == GG_OK) return status;
    // A HELLO that the deadline cut short says less than the failure before it.
    const bool cut_short = status == GG_TIMEOUT && hello_timeout_ms < kControlTimeoutMs;
    if (!worth_retrying && !cut_short) return status;
    if (worth_retrying || last_failure.empty()) {
      last_status = status;
      last_failure = gg_last_error();
    }
    if (now >= deadline || cut_short) {
      const auto waited = std::chrono::duration_cast<milliseconds>(now - start);
      return fail(GG_TIMEOUT, "gg_connect_wait(" + quoted(socket_path) + "): no connection after " +
                                  std::to_string(attempts) + " attempts over " +
                                  std::to_string(waited.count()) + " ms; the last failed with " +
                                  gg_status_name(last_status) + ": " + last_failure);
    }
    std::this_thread::sleep_for(std::min(pause, deadline - now));
    pause = std::min<Clock::duration>(2 * pause, kLongestPause);
  }
}

extern "C" gg_status gg_job(const gg_client* client, gg_job_info* out) {
  if (client == nullptr) return fail(GG_INVALID_ARGUMENT, "gg_job: null client");
  if (out == nullptr) return fail(GG_INVALID_ARGUMENT, "gg_job: null output pointer");
  *out = client->job;
  return GG_OK;
}

extern "C" gg_status gg_collective_timeout(const gg_client* client, uint32_t* timeout_ms) {
  if (client == nullptr) return fail(GG_INVALID_ARGUMENT, "gg_collective_timeout: null client");
  if (timeout_ms == nullptr) {
    return fail(GG_INVALID_ARGUMENT, "gg_collective_timeout: null output pointer");
  }
  *timeout_ms = client->collective_timeout_ms;
  return GG_OK;
}

extern "C" gg_status gg_close(gg_client* client) {
  if (client == nullptr) return fail(GG_INVALID_ARGUMENT, "gg_close: null client");
  gradgate::client_impl::destroy(client);
  return GG_OK;
}
