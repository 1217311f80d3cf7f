// A raw SOCK_SEQPACKET connection to the ingress, for tests that speak the protocol themselves
// (malformed traffic, what the C client never sends), and the pieces of a DECLARE.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "gradgate/ingress_protocol.h"
#include "gradgate/ingress_socket.h"

namespace gradgate::gateway::testing {

namespace proto = gradgate::ingress_protocol;

/// A raw SOCK_SEQPACKET connection to the ingress.
class RawConnection {
 public:
  explicit RawConnection(const std::string& path) {
    fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strcpy(address.sun_path, path.c_str());
    connected_ = connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  }
  ~RawConnection() { close(fd_); }
  bool connected() const { return connected_; }

  bool send(const std::vector<std::byte>& packet, int pass_fd = -1) {
    return proto::send_packet(fd_, packet, pass_fd) == 0;
  }
  /// The next packet (empty at EOF), or nullopt after 10 s without one.
  std::optional<std::vector<std::byte>> receive() {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) return std::nullopt;
    proto::ReceivedPacket packet;
    if (proto::receive_packet(fd_, packet) < 0) return std::vector<std::byte>{};
    return packet.bytes;
  }
  /// Receives an ERROR and then the end of the session; returns the ERROR's message.
  std::string expect_error_then_eof() {
    const auto reply = receive();
    if (!reply) return "<no reply>";
    const auto header = proto::decode_header(*reply);
    if (!header || header->type != proto::MessageType::kError) return "<not an ERROR>";
    const auto error = proto::decode_body<proto::Error>(*reply);
    if (!error || error->status != GG_PROTOCOL_ERROR) return "<bad ERROR>";
    const auto end = receive();
    if (!end || !end->empty()) return "<session not closed>";
    return error->message;
  }
  void hello(uint32_t local_rank) {
    ASSERT_TRUE(send(proto::encode(1, proto::Hello{local_rank})));
    const auto reply = receive();
    ASSERT_TRUE(reply.has_value());
    const auto header = proto::decode_header(*reply);
    ASSERT_TRUE(header.has_value());
    ASSERT_EQ(header->type, proto::MessageType::kHelloOk);
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

inline proto::Declare declare_of(uint64_t elements) {
  proto::Declare d;
  d.name = "raw";
  d.elements = elements;
  d.dtype = 0;
  return d;
}

inline int memfd_of(size_t bytes) {
  const int fd = memfd_create("test", MFD_CLOEXEC);
  EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
  return fd;
}

}  // namespace gradgate::gateway::testing
