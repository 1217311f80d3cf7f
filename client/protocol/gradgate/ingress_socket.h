// Sending and receiving one packet of the ingress protocol on a SOCK_SEQPACKET Unix socket, with
// the file descriptors it carries (SCM_RIGHTS). Shared by libgradgate and the gateway's ingress.
// Sends never raise SIGPIPE; received descriptors are close-on-exec and owned by the caller.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <span>
#include <vector>

#include "gradgate/ingress_protocol.h"

namespace gradgate::ingress_protocol {

/// Sends one packet, with `pass_fd` attached when it is >= 0. Returns 0 or an errno value.
inline int send_packet(int socket_fd, std::span<const std::byte> packet, int pass_fd = -1,
                       int flags = 0) {
  iovec iov{const_cast<std::byte*>(packet.data()), packet.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (pass_fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cmsg), &pass_fd, sizeof(int));
  }
  for (;;) {
    if (sendmsg(socket_fd, &msg, flags | MSG_NOSIGNAL) >= 0) return 0;
    if (errno != EINTR) return errno;
  }
}

/// A received packet: its bytes, the descriptors that came with it, and whether the packet or
/// its control data was cut short (a malformed message).
struct ReceivedPacket {
  std::vector<std::byte> bytes;
  std::vector<int> fds;
  bool truncated = false;         // longer than the buffer (MSG_TRUNC)
  bool descriptors_lost = false;  // some descriptors not received (MSG_CTRUNC): more than
                                  // kMaxFdsPerPacket, or the receiver's table was full

  ReceivedPacket() = default;
  ReceivedPacket(const ReceivedPacket&) = delete;
  ReceivedPacket& operator=(const ReceivedPacket&) = delete;
  ~ReceivedPacket() { close_fds(); }
  void close_fds() {
    for (int fd : fds) ::close(fd);
    fds.clear();
  }
};

/// The most descriptors a packet may carry before it counts as truncated.
inline constexpr size_t kMaxFdsPerPacket = 4;

/// Receives one packet into `out`. Returns its length (0: the peer closed the connection) or
/// -errno.
inline ssize_t receive_packet(int socket_fd, ReceivedPacket& out, int flags = 0) {
  out.close_fds();
  out.bytes.resize(kMaxPacketBytes);
  out.truncated = false;
  out.descriptors_lost = false;
  iovec iov{out.bytes.data(), out.bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerPacket)];
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = 0;
  do {
    n = recvmsg(socket_fd, &msg, flags | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    out.bytes.clear();
    return -errno;
  }
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      out.fds.push_back(fd);
    }
  }
  out.truncated = (msg.msg_flags & MSG_TRUNC) != 0;
  out.descriptors_lost = (msg.msg_flags & MSG_CTRUNC) != 0;
  out.bytes.resize(static_cast<size_t>(n));
  return n;
}

}  // namespace gradgate::ingress_protocol
