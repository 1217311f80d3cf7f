// A raw SOCK_SEQPACKET connection to the ingress, for tests that speak the protocol themselves
// (malformed traffic, what the C client never sends), and the pieces of a DECLARE.
#pragma once

#include <fcntl.h>
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
  void hello(uint32_t local_rank, uint16_t version = proto::kVersion) {
    ASSERT_TRUE(send(proto::encode(1, proto::Hello{local_rank}, version)));
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

/// A memfd of `elements` floats, each `value`, sealed as the C client seals its buffers, and its
/// mapping here.
struct FloatMemfd {
  FloatMemfd(size_t elements, float value)
      : fd(memfd_create("raw", MFD_CLOEXEC | MFD_ALLOW_SEALING)), count(elements) {
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(count * sizeof(float))), 0);
    EXPECT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    data = static_cast<float*>(
        mmap(nullptr, count * sizeof(float), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    for (size_t i = 0; i < count; ++i) data[i] = value;
  }
  ~FloatMemfd() {
    munmap(data, count * sizeof(float));
    close(fd);
  }
  FloatMemfd(const FloatMemfd&) = delete;
  FloatMemfd& operator=(const FloatMemfd&) = delete;
  std::vector<float> values() const { return {data, data + count}; }
  int fd;
  size_t count;
  float* data = nullptr;
};

/// The key of the DECLARE_OK that answers a declaration of `elements` fp32 values in `buffer`,
/// sent in protocol `version`.
inline uint32_t declare(RawConnection& raw, uint64_t request, uint64_t elements,
                        const FloatMemfd& buffer, uint16_t version = proto::kVersion) {
  EXPECT_TRUE(raw.send(proto::encode(request, declare_of(elements), version), buffer.fd));
  const auto reply = raw.receive();
  EXPECT_TRUE(reply.has_value());
  if (!reply) return 0;
  const auto ok = proto::decode_body<proto::DeclareOk>(*reply);
  EXPECT_TRUE(ok.has_value());
  return ok ? ok->key : 0;
}

}  // namespace gradgate::gateway::testing
