#include "tcp_ring_reference.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

namespace gradgate::bench {
namespace {

sockaddr_in loopback(uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("reference ring: ") + what + " failed");
}

void write_all(int fd, const void* data, size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t sent = ::send(fd, p, bytes, MSG_NOSIGNAL);
    check(sent > 0, "send");
    p += sent;
    bytes -= static_cast<size_t>(sent);
  }
}

void read_all(int fd, void* data, size_t bytes) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t got = ::recv(fd, p, bytes, 0);
    check(got > 0, "recv");
    p += got;
    bytes -= static_cast<size_t>(got);
  }
}

// A received partial sum is added in pieces of this many elements (256 KiB), while in cache, from
// a buffer made once: one of a chunk's size allocated per all-reduce is mapped and faulted in
// afresh every time once above glibc's largest mmap threshold (32 MiB, reached at 64 MiB on 2
// ranks), which costs more than the transfer itself.
constexpr size_t kPieceElements = 64 * 1024;

struct Span {
  size_t offset, count;
};

Span chunk_of(size_t elements, uint32_t ranks, uint32_t index) {
  const size_t base = elements / ranks, extra = elements % ranks;
  return {index * base + std::min<size_t>(index, extra), base + (index < extra ? 1 : 0)};
}

}  // namespace

TcpRingReference::TcpRingReference(uint32_t ranks)
    : ranks_(ranks),
      to_right_(ranks, -1),
      from_left_(ranks, -1),
      incoming_(ranks, std::vector<float>(kPieceElements)) {
  std::vector<int> listeners(ranks);
  for (uint32_t r = 0; r < ranks; ++r) {
    listeners[r] = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = loopback(0);
    check(::bind(listeners[r], reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0,
          "bind");
    check(::listen(listeners[r], 4) == 0, "listen");
  }
  const int one = 1;
  for (uint32_t r = 0; r < ranks; ++r) {
    sockaddr_in bound{};
    socklen_t length = sizeof(bound);
    ::getsockname(listeners[(r + 1) % ranks], reinterpret_cast<sockaddr*>(&bound), &length);
    to_right_[r] = ::socket(AF_INET, SOCK_STREAM, 0);
    check(::connect(to_right_[r], reinterpret_cast<sockaddr*>(&bound), sizeof(bound)) == 0,
          "connect");
    ::setsockopt(to_right_[r], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  for (uint32_t r = 0; r < ranks; ++r) {
    from_left_[(r + 1) % ranks] = ::accept(listeners[(r + 1) % ranks], nullptr, nullptr);
    check(from_left_[(r + 1) % ranks] >= 0, "accept");
    ::close(listeners[(r + 1) % ranks]);
  }
}

TcpRingReference::~TcpRingReference() {
  for (int fd : to_right_) ::close(fd);
  for (int fd : from_left_) ::close(fd);
}

void TcpRingReference::run_rank(uint32_t rank, std::vector<float>& data) {
  const uint32_t p = ranks_;
  std::vector<float>& incoming = incoming_[rank];
  auto exchange = [&](uint32_t send_index, uint32_t recv_index, bool add) {
    const Span out = chunk_of(data.size(), p, send_index);
    const Span in = chunk_of(data.size(), p, recv_index);
    std::thread sender(
        [&] { write_all(to_right_[rank], data.data() + out.offset, out.count * sizeof(float)); });
    float* target = data.data() + in.offset;
    if (add) {
      for (size_t done = 0; done < in.count; done += incoming.size()) {
        const size_t count = std::min(incoming.size(), in.count - done);
        read_all(from_left_[rank], incoming.data(), count * sizeof(float));
        for (size_t i = 0; i < count; ++i) target[done + i] += incoming[i];
      }
    } else {
      read_all(from_left_[rank], target, in.count * sizeof(float));
    }
    sender.join();
  };
  for (uint32_t hop = 0; hop + 1 < p; ++hop) {
    exchange((rank + p - hop) % p, (rank + 2 * p - hop - 1) % p, true);
  }
  for (uint32_t hop = 0; hop + 1 < p; ++hop) {
    exchange((rank + 1 + p - hop) % p, (rank + p - hop) % p, false);
  }
}

double TcpRingReference::allreduce(std::vector<std::vector<float>>& data) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < ranks_; ++r) threads.emplace_back([&, r] { run_rank(r, data[r]); });
  for (auto& thread : threads) thread.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace gradgate::bench
