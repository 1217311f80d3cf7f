// gg_connect, gg_job, gg_close: the lifetime of a connection to the gateway.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <exception>

#include "client_state.h"
#include "error.h"
#include "gradgate/ingress_protocol.h"

namespace proto = gradgate::ingress_protocol;
using gradgate::client_impl::fail;
using gradgate::client_impl::quoted;

extern "C" gg_status gg_connect(const char* socket_path, uint32_t local_rank, gg_client** out) {
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

  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(GG_CONNECT_FAILED, what + ": socket: " + std::strerror(errno));
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    const int error = errno;
    close(fd);
    return fail(GG_CONNECT_FAILED, what + ": connect: " + std::strerror(error));
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
  const gg_status status =
      gradgate::client_impl::round_trip(*client, id, reply, packet, -1, what + ": hello");
  if (status != GG_OK) {
    const std::string message = gg_last_error();
    gradgate::client_impl::destroy(client);
    return fail(status, message);
  }
  client->job = reply->job;
  *out = client;
  return GG_OK;
}

extern "C" gg_status gg_job(const gg_client* client, gg_job_info* out) {
  if (client == nullptr) return fail(GG_INVALID_ARGUMENT, "gg_job: null client");
  if (out == nullptr) return fail(GG_INVALID_ARGUMENT, "gg_job: null output pointer");
  *out = client->job;
  return GG_OK;
}

extern "C" gg_status gg_close(gg_client* client) {
  if (client == nullptr) return fail(GG_INVALID_ARGUMENT, "gg_close: null client");
  gradgate::client_impl::destroy(client);
  return GG_OK;
}
