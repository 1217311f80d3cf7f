// The state behind TcpTransport (tcp_transport.h), shared by its sources: tcp_transport.cc (start,
// stop and the calls of the Transport interface), tcp/mesh_connections.cc (connections that come
// up, by accept or dial, and go) and tcp/mesh_liveness.cc (the timers: heartbeats, silent peers,
// link probes). Private to the transport target.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "gateway/transport/counters.h"
#include "gateway/transport/link_meter.h"
#include "gateway/transport/tcp/dialer.h"
#include "gateway/transport/tcp/handshake.h"
#include "gateway/transport/tcp/peer_connection.h"
#include "gateway/transport/tcp/peer_session.h"
#include "gateway/transport/tcp_transport.h"
#include "gradgate/base/log_throttle.h"

namespace gradgate::gateway {

namespace tcp {

// What a rate-limited log line is about; one throttle slot per topic and peer.
enum class LogTopic : uint64_t { kUp, kDown, kLost, kDial, kRefused, kAccept };

// A random incarnation or session id, never 0 (0 says "none" in a Hello).
uint64_t random_nonzero();

}  // namespace tcp

// The transport's state: the I/O thread, the listener, one dialer per lower rank, and every
// peer's session, link meter and current connection.
class TcpTransport::Mesh final : public tcp::ConnectionOwner {
 public:
  explicit Mesh(TcpTransportOptions options) : options_(std::move(options)) {}
  ~Mesh() { stop(); }

  Status start(Handlers handlers);
  void stop();
  Status send(uint32_t to_rank, Message message);
  bool peer_up(uint32_t rank) const;
  uint64_t peer_down_count(uint32_t rank) const;
  void update_peers(const std::vector<net::Endpoint>& peers);
  TransportStats stats() const;
  std::vector<LinkEstimate> links() const;
  uint16_t listen_port() const { return listen_port_; }

  bool deliver(uint32_t rank, MessageBytes&& message) override;
  void connection_closed(tcp::PeerConnection& connection, const std::string& reason,
                         std::optional<PeerDownReason> lost) override;

 private:
  enum class State { kIdle, kRunning, kStopped };
  using Clock = LinkMeter::Clock;
  using LogTopic = tcp::LogTopic;

  struct Peer {
    Peer(uint32_t rank, uint64_t cap_bytes) : session(rank, cap_bytes) {}
    tcp::PeerSession session;
    LinkMeter meter;
    std::shared_ptr<tcp::PeerConnection> connection;  // under peers_mutex_; null while none is up
    uint64_t down_count = 0;                          // under peers_mutex_: sessions lost
    Clock::time_point last_heard{};  // transport thread: when a connection last came up or heard
    // A higher rank (which dials this side): where it listens, whether that address answered a
    // look while the peer was connected, and whether a look is under way (transport thread).
    std::optional<boost::asio::ip::tcp::endpoint> listens_at;
    bool listener_seen = false;
    bool looking = false;
    Clock::time_point last_look{};
  };

  Status check_options() const;
  Status bind_listener();
  void accept_next();
  Status check_incoming(const tcp::Hello& theirs) const;
  /// The acceptor's answer to a peer's Hello: the old connection of that rank goes, and the
  /// session resumes when both sides still hold it.
  Result<tcp::Hello> answer(const tcp::Hello& theirs);
  /// What this side says to `rank` when it dials.
  tcp::Hello hello_to(uint32_t rank) const;
  void add_dialer(uint32_t rank);
  /// A handshaken connection to `rank`: carries the session on, or starts a fresh one.
  void install(boost::asio::ip::tcp::socket socket, uint32_t rank, const tcp::Hello& theirs,
               const tcp::Hello& ours, bool dialed);
  /// A fresh session with `rank`; the open one (if any) ends first, with the reason why.
  void restart_session(uint32_t rank, const tcp::Hello& theirs, uint64_t fresh_id);
  /// Where a higher rank listens, from its accepted connection and Hello (look_for).
  static void note_listener(Peer& peer, const boost::asio::ip::tcp::socket& socket,
                            const tcp::Hello& theirs);
  /// Ends `rank`'s session (if open) and reports the peer down.
  void lose(uint32_t rank, PeerDownReason reason, const std::string& why);
  /// A higher rank whose connection is gone cannot be dialed back, but its listener can be
  /// looked at (a connect, closed at once): when the address that answered while the peer was
  /// connected refuses now, the gateway is gone (its session ends, `refused`).
  void look_for(uint32_t rank);
  std::shared_ptr<tcp::PeerConnection> connection_of(uint32_t rank) const;
  /// Writes a goodbye on every connection, waiting at most kGoodbyeWait. stop(), before the
  /// I/O thread ends.
  void say_goodbyes();
  /// Runs `tick` every `interval` on `timer` until the timer is cancelled or destroyed.
  void every(boost::asio::steady_timer& timer, std::chrono::milliseconds interval,
             void (Mesh::*tick)());
  /// Every half heartbeat: heartbeats on quiet connections, closes silent ones, ends the
  /// sessions of peers from which nothing moved for peer_timeout, looks for dialers that went.
  void check_liveness();
  /// Every probe interval: refreshes each link's round-trip time and probes the links that
  /// carried nothing measurable for two intervals.
  void probe_links();
  void log_limited(spdlog::level::level_enum level, LogTopic topic, uint32_t rank,
                   const std::string& message);

  // peers filled in by start() when resolve_peers is set, changed by update_peers() on the
  // transport thread
  TcpTransportOptions options_;
  Handlers handlers_;
  TransportCounters counters_;
  LogThrottle throttle_;  // transport thread only
  uint16_t listen_port_ = 0;
  uint64_t incarnation_ = 0;
  std::chrono::milliseconds heartbeat_{1000};

  std::mutex lifecycle_mutex_;  // serialises start() and stop()
  State state_ = State::kIdle;
  std::atomic<bool> stopping_{false};  // stop() began: closing connections are not redialed

  // By rank (own entry unused); made before the I/O thread, destroyed after everything that
  // does I/O (connections refer to their session and meter).
  std::vector<std::unique_ptr<Peer>> peers_;
  mutable std::mutex peers_mutex_;  // guards Peer::connection

  // Declared before everything that does I/O on it, so that it is destroyed last of those.
  std::unique_ptr<boost::asio::io_context> io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
  std::unique_ptr<boost::asio::steady_timer> accept_retry_;
  std::unique_ptr<boost::asio::steady_timer> probe_timer_;
  std::unique_ptr<boost::asio::steady_timer> liveness_timer_;
  std::vector<std::unique_ptr<tcp::Dialer>> dialers_;  // by rank; only lower ranks have one
  std::thread thread_;
};

}  // namespace gradgate::gateway
