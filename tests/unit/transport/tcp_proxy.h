// A loopback TCP proxy for disturbing a live connection between two gateways without killing
// either process: the test points the dialling gateway at port() and the proxy forwards every
// connection to the real listener. reset_all() sends an RST to both ends of every forwarded
// connection (reset_at(): once so many bytes have gone through); set_blackhole() freezes them
// (nothing is read or written, so the kernels' buffers fill and neither end sees progress) and
// later lets the held bytes flow on intact.
//
// One thread polls every socket (non-blocking, close-on-exec) with a bounded timeout and an
// eventfd that wakes it; each direction has a bounded buffer, read into only while it has room,
// so back-pressure stays real TCP back-pressure.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace gradgate::gateway::testing {

class TcpProxy {
 public:
  /// Listens on 127.0.0.1 (any port) and forwards to 127.0.0.1:`target_port`. port() is 0 if
  /// the listener could not be set up.
  explicit TcpProxy(uint16_t target_port) : target_port_(target_port) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in address = loopback(0);
    socklen_t length = sizeof(address);
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
        ::listen(listener_, 64) == 0 &&
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      port_ = ntohs(address.sin_port);
    }
    thread_ = std::thread([this] { run(); });
  }
  /// Stops the thread, then closes every socket (a FIN to both ends of each live connection).
  ~TcpProxy() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake();
    thread_.join();
    for (auto& pair : pairs_) close_pair(*pair, false);
    ::close(listener_);
    ::close(wake_fd_);
  }
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  /// The port to dial instead of the target's.
  uint16_t port() const { return port_; }

  /// Closes both sockets of every live forwarded connection with SO_LINGER {1, 0}, so that each
  /// end gets an RST; connections that come later are forwarded as before.
  void reset_all() {
    std::lock_guard lock(mutex_);
    for (auto& pair : pairs_) close_pair(*pair, true);
    pairs_.clear();
    ++epoch_;  // the thread's poll results no longer match pairs_
    wake();
  }

  /// Resets every live connection as reset_all() does once bytes_forwarded() reaches `bytes`:
  /// the thread checks right after its writes, so the reset falls while bytes are moving (in
  /// the middle of a transfer, not between two).
  void reset_at(uint64_t bytes) {
    std::lock_guard lock(mutex_);
    reset_at_ = bytes;
    wake();
  }

  /// On: nothing more is read from or written to any socket and nothing is accepted (new
  /// connections wait in the listen backlog). Off: everything resumes, and the bytes the proxy
  /// held are forwarded intact and in order. Once this returns the thread obeys it.
  void set_blackhole(bool on) {
    std::lock_guard lock(mutex_);
    blackhole_ = on;
    wake();
  }

  /// Connections accepted and forwarded so far (counted once the proxy's own connection to the
  /// target is up).
  uint64_t connections() const {
    std::lock_guard lock(mutex_);
    return connections_;
  }
  /// Bytes written to either side, both directions together.
  uint64_t bytes_forwarded() const {
    std::lock_guard lock(mutex_);
    return bytes_forwarded_;
  }
  /// Waits at most `deadline` until connections() >= `n`; returns whether it got there.
  bool wait_for_connections(uint64_t n, std::chrono::milliseconds deadline) const {
    std::unique_lock lock(mutex_);
    return accepted_.wait_for(lock, deadline, [&] { return connections_ >= n; });
  }

 private:
  static constexpr std::size_t kBufferSize = 256 * 1024;
  static constexpr int kPollMs = 50;
  static constexpr int kAcceptsPerWake = 16;

  // Bytes read from one socket of a pair and not yet written to the other.
  struct Direction {
    std::vector<std::byte> bytes = std::vector<std::byte>(kBufferSize);
    std::size_t start = 0;
    std::size_t end = 0;
    bool eof = false;   // the source has shut down writing
    bool shut = false;  // passed on: the destination has been shut down for writing
    std::size_t room() const { return kBufferSize - (end - start); }
    bool empty() const { return start == end; }
  };
  // fd[0]: the accepted connection; fd[1]: ours to the target. dir[i] carries fd[i] -> fd[1-i].
  struct Pair {
    int fd[2] = {-1, -1};
    Direction dir[2];
    bool connecting = true;  // fd[1]'s non-blocking connect has not completed yet
  };
  enum class Step { kOpen, kClosed, kFailed };

  static sockaddr_in loopback(uint16_t port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return address;
  }
  static void close_pair(Pair& pair, bool reset) {
    const linger abortive{1, 0};
    for (int fd : pair.fd) {
      if (reset) ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abortive, sizeof(abortive));
      ::close(fd);
    }
  }
  void wake() const { eventfd_write(wake_fd_, 1); }

  // What to poll fd[i] for; fd -1 (ignored by poll) when nothing, so a socket that has hung up
  // but cannot be served yet does not make poll return at once again and again.
  static pollfd watch(const Pair& pair, int i) {
    short events = 0;
    if (pair.connecting) {
      events = i == 1 ? POLLOUT : 0;
    } else {
      if (!pair.dir[i].eof && pair.dir[i].room() > 0) events |= POLLIN;
      if (!pair.dir[1 - i].empty()) events |= POLLOUT;
    }
    return {events != 0 ? pair.fd[i] : -1, events, 0};
  }

  // Reads what fits from fd[i]; false on an error.
  static bool receive(Pair& pair, int i) {
    Direction& d = pair.dir[i];
    if (d.eof || d.room() == 0) return true;
    if (d.end == kBufferSize) {  // room only at the front: move the held bytes there
      std::memmove(d.bytes.data(), d.bytes.data() + d.start, d.end - d.start);
      d.end -= d.start;
      d.start = 0;
    }
    const ssize_t n = ::recv(pair.fd[i], d.bytes.data() + d.end, kBufferSize - d.end, 0);
    if (n > 0) d.end += static_cast<std::size_t>(n);
    if (n == 0) d.eof = true;
    return n >= 0 || errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }

  // Writes what dir[i] holds to fd[1-i], then passes an EOF on once all is written.
  bool flush(Pair& pair, int i) {
    Direction& d = pair.dir[i];
    const int to = pair.fd[1 - i];
    if (!d.empty()) {
      const ssize_t n = ::send(to, d.bytes.data() + d.start, d.end - d.start, MSG_NOSIGNAL);
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
      if (n > 0) {
        d.start += static_cast<std::size_t>(n);
        bytes_forwarded_ += static_cast<uint64_t>(n);
      }
      if (d.empty()) d.start = d.end = 0;
    }
    if (d.eof && d.empty() && !d.shut) {
      if (::shutdown(to, SHUT_WR) != 0) return false;
      d.shut = true;
    }
    return true;
  }

  // Moves what can be moved on `pair`; `polled` are its two pollfds.
  Step step(Pair& pair, const pollfd* polled) {
    if (pair.connecting) {
      if (polled[1].revents == 0) return Step::kOpen;
      int error = 0;
      socklen_t length = sizeof(error);
      ::getsockopt(pair.fd[1], SOL_SOCKET, SO_ERROR, &error, &length);
      if (error != 0) return Step::kFailed;
      connected(pair);
    }
    for (int i : {0, 1}) {
      if (!receive(pair, i)) return Step::kFailed;
    }
    for (int i : {0, 1}) {
      if (!flush(pair, i)) return Step::kFailed;
    }
    return pair.dir[0].shut && pair.dir[1].shut ? Step::kClosed : Step::kOpen;
  }

  // Accepts what the backlog holds (a bounded number) and starts dialling the target for each.
  void accept_new() {
    for (int k = 0; k < kAcceptsPerWake; ++k) {
      const int client = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (client < 0) return;
      auto pair = std::make_unique<Pair>();
      pair->fd[0] = client;
      pair->fd[1] = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      const int no_delay = 1;
      for (int fd : pair->fd) {
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &no_delay, sizeof(no_delay));
      }
      const sockaddr_in target = loopback(target_port_);
      if (::connect(pair->fd[1], reinterpret_cast<const sockaddr*>(&target), sizeof(target)) == 0) {
        connected(*pair);
      } else if (errno != EINPROGRESS) {
        close_pair(*pair, true);  // the target is not there: refuse the client too
        continue;
      }
      pairs_.push_back(std::move(pair));
    }
  }

  // fd[1] reached the target: the pair starts forwarding and counts.
  void connected(Pair& pair) {
    pair.connecting = false;
    ++connections_;
    accepted_.notify_all();
  }

  // The thread: snapshot what to wait for, poll without the lock, then do the I/O under it.
  // A poll result is used only if no reset (epoch) and no blackhole came in between.
  void run() {
    std::vector<pollfd> polled;
    for (;;) {
      uint64_t epoch = 0;
      bool io = false;
      {
        std::lock_guard lock(mutex_);
        if (stop_) return;
        epoch = epoch_;
        io = !blackhole_;
        polled.assign(1, pollfd{wake_fd_, POLLIN, 0});
        if (io) {
          polled.push_back(pollfd{listener_, POLLIN, 0});
          for (const auto& pair : pairs_) {
            polled.push_back(watch(*pair, 0));
            polled.push_back(watch(*pair, 1));
          }
        }
      }
      ::poll(polled.data(), polled.size(), kPollMs);
      eventfd_t ignored = 0;
      if (polled[0].revents & POLLIN) eventfd_read(wake_fd_, &ignored);

      std::lock_guard lock(mutex_);
      if (!io || stop_ || blackhole_ || epoch != epoch_) continue;
      const std::size_t polled_pairs = (polled.size() - 2) / 2;  // pairs_ may only have grown
      for (std::size_t k = 0; k < polled_pairs; ++k) {
        const Step result = step(*pairs_[k], &polled[2 + 2 * k]);
        if (result == Step::kOpen) continue;
        close_pair(*pairs_[k], result == Step::kFailed);  // an error reaches both ends as RST
        pairs_[k].reset();
      }
      std::erase(pairs_, nullptr);
      if (reset_at_ != 0 && bytes_forwarded_ >= reset_at_) {
        for (auto& pair : pairs_) close_pair(*pair, true);
        pairs_.clear();
        reset_at_ = 0;
        continue;
      }
      if (polled[1].revents & POLLIN) accept_new();
    }
  }

  const uint16_t target_port_;
  uint16_t port_ = 0;
  int listener_ = -1;
  const int wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  mutable std::mutex mutex_;
  mutable std::condition_variable accepted_;
  std::vector<std::unique_ptr<Pair>> pairs_;  // guarded by mutex_, like everything below
  uint64_t epoch_ = 0;
  uint64_t reset_at_ = 0;  // 0: no reset armed
  bool blackhole_ = false;
  bool stop_ = false;
  uint64_t connections_ = 0;
  uint64_t bytes_forwarded_ = 0;
  std::thread thread_;  // last: starts once everything above is set up
};

}  // namespace gradgate::gateway::testing
