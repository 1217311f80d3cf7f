// Helpers for the transport tests: bounded waits, a handler recorder, raw test sockets that
// speak (or break) the wire protocol, and option builders for loopback meshes.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "gateway/transport/tcp/wire.h"
#include "gateway/transport/tcp_transport.h"

namespace gradgate::gateway::testing {

inline constexpr std::chrono::seconds kDeadline{10};

/// Polls `predicate` until it holds or `deadline` passes; returns its last value.
template <typename Predicate>
bool eventually(Predicate predicate, std::chrono::milliseconds deadline = kDeadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (!predicate()) {
    if (std::chrono::steady_clock::now() >= until) return predicate();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

/// A message that says who sent it and its sequence number, padded to `size` bytes (>= 8)
/// with a pattern derived from both.
inline Message numbered_message(uint32_t from, uint32_t sequence, std::size_t size = 64) {
  auto bytes = std::make_shared<MessageBytes>(size);
  std::memcpy(bytes->data(), &from, 4);
  std::memcpy(bytes->data() + 4, &sequence, 4);
  for (std::size_t i = 8; i < size; ++i) (*bytes)[i] = std::byte((i * 31 + sequence + from) & 0xff);
  return bytes;
}

inline uint32_t sequence_of(const MessageBytes& message) {
  uint32_t sequence = 0;
  std::memcpy(&sequence, message.data() + 4, 4);
  return sequence;
}

/// Records what a transport reports; thread-safe. Messages whose first byte is 0xFF are
/// rejected (the handler returns false).
class Recorder {
 public:
  static constexpr std::byte kRejectMarker{0xFF};
  /// What the transport said of a peer when it reported it up or down (watch()).
  struct Liveness {
    bool up = false;
    uint64_t down_count = 0;
    bool operator==(const Liveness&) const = default;
  };

  /// From now on each on_peer notes what `transport` says of the peer then (peer_up,
  /// peer_down_count): the change must already show. Call before the transport starts.
  void watch(const Transport& transport) { watched_ = &transport; }

  Transport::Handlers handlers() {
    Transport::Handlers handlers;
    handlers.on_message = [this](uint32_t from, MessageBytes&& message) {
      std::lock_guard lock(mutex_);
      if (forbidden_) ++calls_after_forbid_;
      if (!message.empty() && message[0] == kRejectMarker) return false;
      messages_[from].push_back(std::move(message));
      return true;
    };
    handlers.on_peer = [this](uint32_t rank, bool up) {
      std::optional<Liveness> seen;
      if (watched_) seen = Liveness{watched_->peer_up(rank), watched_->peer_down_count(rank)};
      std::lock_guard lock(mutex_);
      if (forbidden_) ++calls_after_forbid_;
      (up ? ups_ : downs_)[rank]++;
      peer_events_[rank].push_back(up);
      if (seen) liveness_[rank].push_back(*seen);
    };
    return handlers;
  }

  std::size_t count_from(uint32_t rank) const {
    std::lock_guard lock(mutex_);
    auto it = messages_.find(rank);
    return it == messages_.end() ? 0 : it->second.size();
  }
  std::vector<MessageBytes> messages_from(uint32_t rank) const {
    std::lock_guard lock(mutex_);
    auto it = messages_.find(rank);
    return it == messages_.end() ? std::vector<MessageBytes>{} : it->second;
  }
  /// Rank `rank`'s reports in order: true up, false down.
  std::vector<bool> peer_events(uint32_t rank) const {
    std::lock_guard lock(mutex_);
    auto it = peer_events_.find(rank);
    return it == peer_events_.end() ? std::vector<bool>{} : it->second;
  }
  /// What the watched transport said of `rank` at each of its reports, in order.
  std::vector<Liveness> liveness(uint32_t rank) const {
    std::lock_guard lock(mutex_);
    auto it = liveness_.find(rank);
    return it == liveness_.end() ? std::vector<Liveness>{} : it->second;
  }
  int ups(uint32_t rank) const { return lookup(ups_, rank); }
  int downs(uint32_t rank) const { return lookup(downs_, rank); }

  /// From now on every handler call is counted as a violation.
  void forbid_calls() {
    std::lock_guard lock(mutex_);
    forbidden_ = true;
  }
  int calls_after_forbid() const {
    std::lock_guard lock(mutex_);
    return calls_after_forbid_;
  }

 private:
  int lookup(const std::map<uint32_t, int>& map, uint32_t rank) const {
    std::lock_guard lock(mutex_);
    auto it = map.find(rank);
    return it == map.end() ? 0 : it->second;
  }

  mutable std::mutex mutex_;
  std::map<uint32_t, std::vector<MessageBytes>> messages_;
  std::map<uint32_t, int> ups_;
  std::map<uint32_t, int> downs_;
  std::map<uint32_t, std::vector<bool>> peer_events_;
  std::map<uint32_t, std::vector<Liveness>> liveness_;
  const Transport* watched_ = nullptr;
  bool forbidden_ = false;
  int calls_after_forbid_ = 0;
};

/// A plain blocking loopback socket for playing a misbehaving peer; every receive is bounded
/// by kDeadline. A `receive_buffer` (bytes, > 0) fixes the socket's receive buffer before it
/// connects, so that a peer that stops reading holds a known, small amount however the kernel
/// would otherwise grow the buffer.
class RawPeer {
 public:
  explicit RawPeer(uint16_t port, int receive_buffer = 0) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    if (receive_buffer > 0) {
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
    }
    timeval timeout{static_cast<time_t>(kDeadline.count()), 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    const int no_delay = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &no_delay, sizeof(no_delay));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    socklen_t length = sizeof(address);
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      listen_port_ = ntohs(address.sin_port);
    }
  }
  ~RawPeer() { ::close(fd_); }
  RawPeer(const RawPeer&) = delete;
  RawPeer& operator=(const RawPeer&) = delete;

  bool connected() const { return connected_; }
  /// The port this peer says it listens on: its own socket's, where nothing listens, unless a
  /// test sets another.
  uint16_t listen_port() const { return listen_port_; }
  void set_listen_port(uint16_t port) { listen_port_ = port; }

  bool send_bytes(std::span<const std::byte> bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }
  /// Sends a hello as `rank` of `job_id` (listening on listen_port()); a session is named by
  /// `incarnation` (0: a new one, as a gateway that just started) and what it holds of the
  /// transport's (`peer_incarnation`, `received`, `session_id`).
  bool send_hello(uint64_t job_id, uint32_t rank, uint64_t incarnation = 0,
                  uint64_t peer_incarnation = 0, uint64_t received = 0, uint64_t session_id = 0) {
    static std::atomic<uint64_t> next_incarnation{0x5eed0000};
    if (incarnation == 0) incarnation = ++next_incarnation;
    return send_bytes(tcp::encode_handshake({.job_id = job_id,
                                             .rank = rank,
                                             .listen_port = listen_port_,
                                             .incarnation = incarnation,
                                             .peer_incarnation = peer_incarnation,
                                             .received = received,
                                             .session_id = session_id}));
  }
  /// Sends one length-prefixed message (or control frame) whose prefix says `declared_length`.
  /// In one write, so that a transport that resets the connection at the prefix cannot fail the
  /// send half way.
  bool send_frame(uint32_t declared_length, std::span<const std::byte> body, bool control = false) {
    const tcp::LengthPrefix prefix = tcp::encode_length(declared_length, control);
    std::vector<std::byte> frame(prefix.begin(), prefix.end());
    frame.insert(frame.end(), body.begin(), body.end());
    return send_bytes(frame);
  }
  /// Reads the transport's answer to our hello; false if none came.
  bool read_hello(tcp::Hello* hello) {
    tcp::HandshakeBytes bytes{};
    std::size_t got = 0;
    while (got < bytes.size()) {
      const ssize_t n = ::recv(fd_, bytes.data() + got, bytes.size() - got, 0);
      if (n <= 0) return false;
      got += static_cast<std::size_t>(n);
    }
    Result<tcp::Hello> decoded = tcp::decode_handshake(bytes);
    if (!decoded.ok()) return false;
    *hello = *decoded;
    return true;
  }
  /// Reads until the transport closes the connection; returns the number of bytes that came
  /// first, or -1 if it was still open when kDeadline passed.
  long read_until_closed() {
    long total = 0;
    std::byte buffer[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n > 0) {
        total += n;
        continue;
      }
      if (n == 0 || errno == ECONNRESET) return total;
      return -1;  // timed out
    }
  }

 private:
  int fd_;
  bool connected_ = false;
  uint16_t listen_port_ = 0;
};

/// A loopback listener that accepts connections and never answers them: plays a gateway that
/// hangs during the handshake.
class SilentListener {
 public:
  SilentListener() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    ::listen(fd_, 16);
    socklen_t length = sizeof(address);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
  }
  ~SilentListener() {
    for (int fd : accepted_) ::close(fd);
    ::close(fd_);
  }
  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;

  uint16_t port() const { return port_; }

  /// Accepts one connection, waiting at most kDeadline; returns its descriptor or -1.
  int accept_one() {
    pollfd ready{fd_, POLLIN, 0};
    if (::poll(&ready, 1, static_cast<int>(kDeadline.count() * 1000)) != 1) return -1;
    const int fd = ::accept(fd_, nullptr, nullptr);
    if (fd >= 0) accepted_.push_back(fd);
    return fd;
  }

  /// Whether the other side closed accepted connection `fd` within kDeadline (what it sent
  /// before is skipped).
  static bool closed_by_peer(int fd) {
    const auto until = std::chrono::steady_clock::now() + kDeadline;
    std::byte buffer[256];
    while (std::chrono::steady_clock::now() < until) {
      pollfd ready{fd, POLLIN, 0};
      if (::poll(&ready, 1, static_cast<int>(kDeadline.count() * 1000)) != 1) return false;
      if (::recv(fd, buffer, sizeof(buffer), 0) <= 0) return true;
    }
    return false;
  }

 private:
  int fd_;
  uint16_t port_ = 0;
  std::vector<int> accepted_;
};

/// Options for rank `rank` of a loopback mesh of `world` gateways whose already started lower
/// ranks listen on `ports` (rank i at ports[i]); listens on `listen_port` (0: any).
inline TcpTransportOptions loopback_options(uint32_t rank, uint32_t world,
                                            const std::vector<uint16_t>& ports,
                                            uint16_t listen_port = 0, uint64_t job_id = 7) {
  TcpTransportOptions options;
  options.job_id = job_id;
  options.rank = rank;
  options.listen = {"127.0.0.1", listen_port};
  options.connect_timeout = std::chrono::milliseconds(1000);
  options.reconnect_min = std::chrono::milliseconds(10);
  options.reconnect_max = std::chrono::milliseconds(200);
  options.probe_interval = std::chrono::milliseconds(0);  // counts stay exact; tests turn it on
  options.peer_timeout = std::chrono::milliseconds(2000);
  for (uint32_t i = 0; i < world; ++i) {
    options.peers.push_back({"127.0.0.1", i < ports.size() ? ports[i] : uint16_t{0}});
  }
  return options;
}

/// A started transport and the recorder of its handlers.
struct Node {
  std::unique_ptr<Recorder> recorder = std::make_unique<Recorder>();
  std::unique_ptr<TcpTransport> transport;
};

/// Starts rank `rank`; lower ranks must already listen on `ports`. Appends its port to `ports`
/// when it is the next rank.
inline Node start_node(TcpTransportOptions options, std::vector<uint16_t>* ports = nullptr) {
  Node node;
  node.transport = std::make_unique<TcpTransport>(options);
  node.recorder->watch(*node.transport);
  Status status = node.transport->start(node.recorder->handlers());
  if (!status.ok()) {
    node.transport.reset();
    return node;
  }
  if (ports && ports->size() == options.rank) ports->push_back(node.transport->listen_port());
  return node;
}

/// Starts a full loopback mesh of `world` gateways (rank order; links probed every
/// `probe_interval`, 0: never) and waits until every pair is
/// connected (on_peer reported on both sides); returns an empty vector if that does not happen in
/// time.
inline std::vector<Node> start_mesh(
    uint32_t world, std::chrono::milliseconds probe_interval = std::chrono::milliseconds(0)) {
  std::vector<Node> nodes;
  std::vector<uint16_t> ports;
  for (uint32_t rank = 0; rank < world; ++rank) {
    TcpTransportOptions options = loopback_options(rank, world, ports);
    options.probe_interval = probe_interval;
    nodes.push_back(start_node(options, &ports));
    if (!nodes.back().transport) return {};
  }
  const bool connected = eventually([&] {
    for (uint32_t rank = 0; rank < world; ++rank) {
      for (uint32_t peer = 0; peer < world; ++peer) {
        if (peer != rank && nodes[rank].recorder->ups(peer) == 0) return false;
      }
    }
    return true;
  });
  if (!connected) return {};
  return nodes;
}

}  // namespace gradgate::gateway::testing
