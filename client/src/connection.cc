// The client's side of the socket: sending requests, the reader thread that completes them, and
// tearing the connection down.
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "client_state.h"
#include "error.h"
#include "gradgate/base/codec_table.h"
#include "gradgate/ingress_protocol.h"
#include "gradgate/ingress_socket.h"

namespace gradgate::client_impl {
namespace proto = gradgate::ingress_protocol;

SharedBuffer::~SharedBuffer() {
  unmap();
  close_fd();
}

void SharedBuffer::unmap() {
  if (data != nullptr) munmap(data, bytes);
  data = nullptr;
}

void SharedBuffer::close_fd() {
  if (fd >= 0) close(fd);
  fd = -1;
}

namespace {

void complete(Reply& reply, gg_status status, std::string message) {
  reply.done = true;
  reply.status = status;
  reply.message = std::move(message);
  if (reply.buffer) reply.buffer->in_flight = false;
  reply.buffer.reset();
}

/// Marks the connection gone and completes everything pending with `status` (caller holds mu).
void break_connection(gg_client& client, gg_status status, const std::string& reason) {
  if (!client.broken) {
    client.broken = true;
    client.broken_reason = reason;
  }
  for (auto& [id, reply] : client.pending) complete(*reply, status, reason);
  client.pending.clear();
  client.cv.notify_all();
}

/// Takes the pending reply of `request_id` (caller holds mu); null if none waits for it.
std::shared_ptr<Reply> take_pending(gg_client& client, uint64_t request_id) {
  auto it = client.pending.find(request_id);
  if (it == client.pending.end()) return nullptr;
  auto reply = std::move(it->second);
  client.pending.erase(it);
  return reply;
}

/// Applies one reply packet (caller holds mu). Returns why it is malformed, "" if it is fine.
std::string apply_packet(gg_client& client, const proto::ReceivedPacket& packet) {
  if (packet.truncated) return "a reply longer than " + std::to_string(proto::kMaxPacketBytes);
  if (!packet.fds.empty()) return "a reply carrying file descriptors";
  const auto header = proto::decode_header(packet.bytes);
  if (!header) return "a reply without the protocol's magic";
  if (header->version != proto::kVersion) {
    return "protocol version " + std::to_string(header->version) + " (this library speaks " +
           std::to_string(proto::kVersion) + ")";
  }
  auto body_error = [&] {
    return "a malformed reply of type " + std::to_string(static_cast<int>(header->type));
  };
  switch (header->type) {
    case proto::MessageType::kHelloOk: {
      const auto m = proto::decode_body<proto::HelloOk>(packet.bytes);
      if (!m || !m->collective_timeout_ms) return body_error();
      if (auto reply = take_pending(client, header->request_id)) {
        reply->job = {m->node_rank, m->nodes, m->local_workers, m->world_size};
        reply->collective_timeout_ms = *m->collective_timeout_ms;
        complete(*reply, GG_OK, "");
      }
      return "";
    }
    case proto::MessageType::kDeclareOk: {
      const auto m = proto::decode_body<proto::DeclareOk>(packet.bytes);
      if (!m) return body_error();
      if (auto reply = take_pending(client, header->request_id)) {
        reply->key = m->key;
        complete(*reply, GG_OK, "");
      }
      return "";
    }
    case proto::MessageType::kReleaseOk: {
      if (!proto::decode_body<proto::ReleaseOk>(packet.bytes)) return body_error();
      if (auto reply = take_pending(client, header->request_id)) complete(*reply, GG_OK, "");
      return "";
    }
    case proto::MessageType::kAllreduceDone: {
      const auto m = proto::decode_body<proto::AllreduceDone>(packet.bytes);
      if (!m || m->status > GG_NONFINITE_GRADIENT || !m->codec) return body_error();
      if (auto reply = take_pending(client, header->request_id)) {
        reply->info = {m->step,           m->raw_bytes,           m->wire_bytes,
                       m->encode_seconds, m->communicate_seconds, m->decode_seconds};
        // A codec newer than this library is one it does not know, not a malformed reply.
        reply->codec = is_codec_id(*m->codec) ? static_cast<gg_codec>(*m->codec) : GG_CODEC_UNKNOWN;
        complete(*reply, static_cast<gg_status>(m->status), m->message);
      }
      return "";
    }
    case proto::MessageType::kError: {
      const auto m = proto::decode_body<proto::Error>(packet.bytes);
      if (!m || m->status > GG_RANK_IN_USE || m->status == GG_OK) return body_error();
      if (auto reply = take_pending(client, header->request_id)) {
        complete(*reply, static_cast<gg_status>(m->status), m->message);
      } else {
        client.broken_reason = "gateway reported: " + m->message;
      }
      return "";
    }
    default:
      return "a reply of unknown type " + std::to_string(static_cast<int>(header->type));
  }
}

}  // namespace

std::pair<uint64_t, std::shared_ptr<Reply>> add_pending(gg_client& client) {
  const uint64_t id = client.next_request_id++;
  auto reply = std::make_shared<Reply>();
  client.pending.emplace(id, reply);
  return {id, reply};
}

std::string send_to_gateway(gg_client& client, std::span<const std::byte> packet, int pass_fd) {
  const int error = proto::send_packet(client.fd, packet, pass_fd);
  if (error == 0) return "";
  const std::string reason = "connection to the gateway at \"" + client.socket_path +
                             "\" lost: send: " + std::strerror(error);
  std::lock_guard lock(client.mu);
  break_connection(client, GG_CLOSED, reason);
  return reason;
}

gg_status round_trip(gg_client& client, uint64_t request_id, const std::shared_ptr<Reply>& reply,
                     std::span<const std::byte> packet, int pass_fd, int timeout_ms,
                     const std::string& what) {
  if (const std::string reason = send_to_gateway(client, packet, pass_fd); !reason.empty()) {
    return fail(GG_CLOSED, what + ": " + reason);
  }
  std::unique_lock lock(client.mu);
  const bool done = client.cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                                       [&] { return reply->done || client.closing; });
  if (!done) {
    client.pending.erase(request_id);
    return fail(GG_TIMEOUT,
                what + ": no reply from the gateway within " + std::to_string(timeout_ms) + " ms");
  }
  if (!reply->done) return fail(GG_CLOSED, what + ": the client is closing");
  if (reply->status != GG_OK) {
    return fail(reply->status, what + ": gateway answered " + gg_status_name(reply->status) + ": " +
                                   reply->message);
  }
  return GG_OK;
}

void read_replies(gg_client* client) {
  proto::ReceivedPacket packet;
  for (;;) {
    const ssize_t n = proto::receive_packet(client->fd, packet);
    std::lock_guard lock(client->mu);
    if (n <= 0) {
      const std::string cause = n == 0 ? "the gateway closed the connection"
                                       : std::string("receive: ") + std::strerror(-n);
      std::string reason =
          "connection to the gateway at \"" + client->socket_path + "\" lost: " + cause;
      if (!client->broken_reason.empty()) reason += " (" + client->broken_reason + ")";
      break_connection(*client, GG_CLOSED, reason);
      return;
    }
    if (const std::string error = apply_packet(*client, packet); !error.empty()) {
      break_connection(*client, GG_PROTOCOL_ERROR,
                       "the gateway at \"" + client->socket_path + "\" sent " + error);
      shutdown(client->fd, SHUT_RDWR);
      return;
    }
    client->cv.notify_all();
  }
}

void destroy(gg_client* client) {
  {
    std::lock_guard lock(client->mu);
    client->closing = true;
    break_connection(*client, GG_CLOSED, "the client was closed");
  }
  shutdown(client->fd, SHUT_RDWR);
  if (client->reader.joinable()) client->reader.join();
  {
    std::unique_lock lock(client->mu);
    client->cv.wait(lock, [&] { return client->waiters == 0; });
  }
  close(client->fd);
  delete client;
}

}  // namespace gradgate::client_impl
