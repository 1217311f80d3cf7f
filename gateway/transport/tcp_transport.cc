#include "gateway/transport/tcp_transport.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>
#include <boost/asio/error.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/net/listener.h"
#include "gateway/transport/counters.h"
#include "gateway/transport/log_throttle.h"
#include "gateway/transport/send_checks.h"
#include "gateway/transport/tcp/dialer.h"
#include "gateway/transport/tcp/handshake.h"
#include "gateway/transport/tcp/peer_connection.h"
#include "gateway/transport/tcp/peer_session.h"
#include "gateway/transport/tcp/silence.h"

namespace gradgate::gateway {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

constexpr std::chrono::milliseconds kAcceptRetryDelay{100};
// How long stop() waits for the goodbyes to be written.
constexpr std::chrono::milliseconds kGoodbyeWait{200};

// What a rate-limited log line is about; one throttle slot per topic and peer.
enum class LogTopic : uint64_t { kUp, kDown, kLost, kDial, kRefused, kAccept };

uint64_t throttle_key(LogTopic topic, uint32_t rank) {
  return (static_cast<uint64_t>(topic) << 32) | rank;
}

std::string describe(const asio::ip::tcp::socket& socket) {
  error_code ec;
  const auto remote = socket.remote_endpoint(ec);
  if (ec) return "unknown address";
  return remote.address().to_string() + ":" + std::to_string(remote.port());
}

}  // namespace

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
  void update_peers(const std::vector<Endpoint>& peers);
  TransportStats stats() const;
  std::vector<LinkEstimate> links() const;
  uint16_t listen_port() const { return listen_port_; }

  bool deliver(uint32_t rank, MessageBytes&& message) override;
  void connection_closed(tcp::PeerConnection& connection, const std::string& reason,
                         std::optional<PeerDownReason> lost) override;

 private:
  enum class State { kIdle, kRunning, kStopped };
  using Clock = LinkMeter::Clock;

  struct Peer {
    Peer(uint32_t rank, uint64_t cap_bytes) : session(rank, cap_bytes) {}
    tcp::PeerSession session;
    LinkMeter meter;
    std::shared_ptr<tcp::PeerConnection> connection;  // under peers_mutex_; null while none is up
    Clock::time_point last_heard{};  // transport thread: when a connection last came up or heard
    // A higher rank (which dials this side): where it listens, whether that address answered a
    // look while the peer was connected, and whether a look is under way (transport thread).
    std::optional<asio::ip::tcp::endpoint> listens_at;
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
  void install(asio::ip::tcp::socket socket, uint32_t rank, const tcp::Hello& theirs,
               const tcp::Hello& ours, bool dialed);
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
  void every(asio::steady_timer& timer, std::chrono::milliseconds interval, void (Mesh::*tick)());
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
  std::unique_ptr<asio::io_context> io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::unique_ptr<asio::ip::tcp::acceptor> acceptor_;
  std::unique_ptr<asio::steady_timer> accept_retry_;
  std::unique_ptr<asio::steady_timer> probe_timer_;
  std::unique_ptr<asio::steady_timer> liveness_timer_;
  std::vector<std::unique_ptr<tcp::Dialer>> dialers_;  // by rank; only lower ranks have one
  std::thread thread_;
};

Status TcpTransport::Mesh::check_options() const {
  const auto world = options_.peers.size();
  if (options_.rank >= world) {
    return Status(ErrorCode::kInvalidArgument, "transport: rank " + std::to_string(options_.rank) +
                                                   " is outside the " + std::to_string(world) +
                                                   " peers");
  }
  if (options_.max_message_bytes == 0 || options_.max_message_bytes > tcp::kMaxLength) {
    return Status(ErrorCode::kInvalidArgument,
                  "transport: max_message_bytes must be in [1, 2^31 - 1], got " +
                      std::to_string(options_.max_message_bytes));
  }
  if (options_.send_queue_bytes == 0 || options_.connect_timeout.count() <= 0 ||
      options_.reconnect_min.count() <= 0 || options_.reconnect_max < options_.reconnect_min ||
      options_.peer_timeout.count() < 0) {
    return Status(
        ErrorCode::kInvalidArgument,
        "transport: send_queue_bytes, connect_timeout and reconnect_min must be positive, "
        "reconnect_max at least reconnect_min and peer_timeout not negative");
  }
  for (uint32_t rank = 0; rank < options_.rank; ++rank) {
    const Endpoint& peer = options_.peers[rank];
    if (peer.host.empty() || peer.port == 0) {
      return Status(ErrorCode::kInvalidArgument, "transport: peer " + std::to_string(rank) +
                                                     " has no usable address ('" +
                                                     peer.to_string() + "')");
    }
  }
  return {};
}

namespace {

// A random incarnation or session id, never 0 (0 says "none" in a Hello).
uint64_t random_nonzero() {
  std::random_device device;
  std::mt19937_64 generator(
      (static_cast<uint64_t>(device()) << 32) ^ device() ^
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  uint64_t incarnation = 0;
  while (incarnation == 0) incarnation = generator();
  return incarnation;
}

}  // namespace

Status TcpTransport::Mesh::start(Handlers handlers) {
  std::lock_guard lock(lifecycle_mutex_);
  if (state_ != State::kIdle) {
    return Status(ErrorCode::kAborted, "transport: start() after start() or stop()");
  }
  if (!options_.resolve_peers) GRADGATE_RETURN_IF_ERROR(check_options());
  handlers_ = std::move(handlers);
  io_ = std::make_unique<asio::io_context>(1);
  GRADGATE_RETURN_IF_ERROR(bind_listener());
  if (options_.resolve_peers) {
    auto peers = options_.resolve_peers(listen_port_);
    if (!peers.ok()) return peers.status();
    if (peers->size() != options_.peers.size()) {
      return Status(ErrorCode::kInvalidArgument,
                    "transport: the membership lists " + std::to_string(peers->size()) +
                        " gateways, the job has " + std::to_string(options_.peers.size()));
    }
    options_.peers = std::move(peers).value();
    GRADGATE_RETURN_IF_ERROR(check_options());
  }
  incarnation_ = random_nonzero();
  if (options_.peer_timeout.count() > 0) {
    heartbeat_ = std::clamp<std::chrono::milliseconds>(
        options_.peer_timeout / 8, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
  }
  {
    std::lock_guard peers_lock(peers_mutex_);  // stats() may look meanwhile
    for (uint32_t rank = 0; rank < options_.peers.size(); ++rank) {
      peers_.push_back(std::make_unique<Peer>(rank, options_.send_queue_bytes));
    }
  }
  accept_retry_ = std::make_unique<asio::steady_timer>(*io_);
  accept_next();
  probe_timer_ = std::make_unique<asio::steady_timer>(*io_);
  if (options_.probe_interval.count() > 0) {
    every(*probe_timer_, options_.probe_interval, &Mesh::probe_links);
  }
  liveness_timer_ = std::make_unique<asio::steady_timer>(*io_);
  every(*liveness_timer_, heartbeat_ / 2, &Mesh::check_liveness);
  dialers_.resize(options_.peers.size());
  for (uint32_t rank = 0; rank < options_.rank; ++rank) add_dialer(rank);
  work_.emplace(io_->get_executor());
  thread_ = std::thread([this] { io_->run(); });
  state_ = State::kRunning;
  spdlog::info("transport: rank {} of job {} listening on {}:{}, {} peers", options_.rank,
               options_.job_id, options_.listen.host, listen_port_, options_.peers.size() - 1);
  return {};
}

Status TcpTransport::Mesh::bind_listener() {
  const std::string host = options_.listen.host.empty() ? "0.0.0.0" : options_.listen.host;
  auto listening = net::listen_tcp(*io_, host, options_.listen.port);
  if (!listening.ok()) {
    return Status(listening.status().code(), "transport: " + listening.status().message());
  }
  acceptor_ = std::make_unique<asio::ip::tcp::acceptor>(std::move(listening).value());
  error_code ec;
  listen_port_ = acceptor_->local_endpoint(ec).port();
  return {};
}

void TcpTransport::Mesh::accept_next() {
  acceptor_->async_accept([this](const error_code& ec, asio::ip::tcp::socket socket) {
    if (stopping_) return;  // the listener closed for stop()
    if (ec) {
      log_limited(spdlog::level::warn, LogTopic::kAccept, 0, "transport: accept: " + ec.message());
      accept_retry_->expires_after(kAcceptRetryDelay);
      accept_retry_->async_wait([this](const error_code& wait_ec) {
        if (!wait_ec) accept_next();
      });
      return;
    }
    error_code ignored;
    socket.set_option(asio::ip::tcp::no_delay(true), ignored);
    std::string remote = describe(socket);
    tcp::accept_handshake(
        std::move(socket), options_.connect_timeout,
        [this](const tcp::Hello& theirs) { return answer(theirs); },
        [this, remote](Result<tcp::Hello> theirs, const tcp::Hello& ours,
                       asio::ip::tcp::socket handshaken) {
          if (theirs.ok()) {
            return install(std::move(handshaken), theirs->rank, *theirs, ours, /*dialed=*/false);
          }
          if (theirs.status().code() == ErrorCode::kIncompatible) ++counters_.foreign;
          // Closed before a hello came: another gateway looking whether this one is there
          // (look_for), or a port check. Only strangers and timeouts are worth a warning.
          const bool closed = theirs.status().code() == ErrorCode::kUnavailable;
          log_limited(
              closed ? spdlog::level::debug : spdlog::level::warn, LogTopic::kRefused, 0,
              "transport: refused a connection from " + remote + ": " + theirs.status().message());
        });
    accept_next();
  });
}

Status TcpTransport::Mesh::check_incoming(const tcp::Hello& theirs) const {
  if (theirs.job_id != options_.job_id) {
    return Status(ErrorCode::kIncompatible, "handshake: job " + std::to_string(theirs.job_id) +
                                                ", expected " + std::to_string(options_.job_id));
  }
  if (theirs.rank <= options_.rank || theirs.rank >= options_.peers.size()) {
    return Status(ErrorCode::kIncompatible, "handshake: rank " + std::to_string(theirs.rank) +
                                                " may not dial rank " +
                                                std::to_string(options_.rank) + " (only ranks " +
                                                std::to_string(options_.rank + 1) + ".." +
                                                std::to_string(options_.peers.size() - 1) + " do)");
  }
  return {};
}

Result<tcp::Hello> TcpTransport::Mesh::answer(const tcp::Hello& theirs) {
  if (stopping_) return Status(ErrorCode::kUnavailable, "handshake: this gateway is stopping");
  GRADGATE_RETURN_IF_ERROR(check_incoming(theirs));
  // The old connection goes first, so that no more of its messages are delivered and the count
  // below is final.
  if (auto previous = connection_of(theirs.rank)) {
    previous->close("replaced by a new connection from the same rank");
  }
  const tcp::PeerSession& session = peers_[theirs.rank]->session;
  const bool resume = session.can_resume(theirs, incarnation_);
  return tcp::Hello{.job_id = options_.job_id,
                    .rank = options_.rank,
                    .listen_port = listen_port_,
                    .incarnation = incarnation_,
                    .peer_incarnation = resume ? session.peer_incarnation() : theirs.incarnation,
                    .received = resume ? session.delivered() : 0,
                    .session_id = resume ? session.id() : random_nonzero(),
                    .resumed = resume};
}

tcp::Hello TcpTransport::Mesh::hello_to(uint32_t rank) const {
  const tcp::PeerSession& session = peers_[rank]->session;
  return {.job_id = options_.job_id,
          .rank = options_.rank,
          .listen_port = listen_port_,
          .incarnation = incarnation_,
          .peer_incarnation = session.peer_incarnation(),
          .received = session.delivered(),
          .session_id = session.id()};
}

void TcpTransport::Mesh::add_dialer(uint32_t rank) {
  tcp::Dialer::Options dial;
  dial.hello = [this, rank] { return hello_to(rank); };
  dial.job_id = options_.job_id;
  dial.target_rank = rank;
  dial.target = options_.peers[rank];
  dial.connect_timeout = options_.connect_timeout;
  dial.reconnect_min = options_.reconnect_min;
  dial.reconnect_max = options_.reconnect_max;
  dialers_[rank] = std::make_unique<tcp::Dialer>(
      *io_, std::move(dial),
      [this, rank](asio::ip::tcp::socket socket, const tcp::Hello& theirs, const tcp::Hello& ours) {
        install(std::move(socket), rank, theirs, ours, /*dialed=*/true);
      },
      [this, rank](const Status& status, const Endpoint& dialed, bool refused) {
        if (status.code() == ErrorCode::kIncompatible) ++counters_.foreign;
        const std::string what = "transport: dialing rank " + std::to_string(rank) + " at " +
                                 dialed.to_string() + " failed: " + status.message();
        if (refused) lose(rank, PeerDownReason::kRefused, what);
        log_limited(spdlog::level::warn, LogTopic::kDial, rank, what);
      });
  dialers_[rank]->dial();
}

void TcpTransport::Mesh::install(asio::ip::tcp::socket socket, uint32_t rank,
                                 const tcp::Hello& theirs, const tcp::Hello& ours, bool dialed) {
  error_code ignored;
  if (stopping_) return socket.close(ignored);
  Peer& peer = *peers_[rank];
  const std::string remote = describe(socket);
  const bool resumed = dialed ? theirs.resumed : ours.resumed;
  const uint64_t fresh_id = dialed ? theirs.session_id : ours.session_id;
  if ((resumed && !peer.session.can_resume(theirs, incarnation_)) || (!resumed && fresh_id == 0)) {
    // The session changed while the handshake ran (it was lost meanwhile), or the peer answered
    // what this side cannot take: this connection cannot carry it.
    socket.close(ignored);
    if (dialed && peer.session.open()) {
      lose(rank, PeerDownReason::kProtocol,
           "rank " + std::to_string(rank) + " answered a session this side does not hold");
    }
    if (dialed) dialers_[rank]->redial();
    return;
  }
  uint64_t write_from = 0;
  if (resumed) {
    write_from = peer.session.resume(theirs.received);
    ++counters_.reconnects;
  } else {
    if (peer.session.open()) {
      // Another incarnation: the peer restarted. The same one under another session: one of the
      // two sides had given the session up (nothing of the other moved for its peer timeout, or
      // a handshake broke off half way). The same session: its delivered count is outside what
      // was sent, which breaks the protocol.
      if (theirs.incarnation != peer.session.peer_incarnation()) {
        lose(rank, PeerDownReason::kRestarted,
             "rank " + std::to_string(rank) + " restarted (a new incarnation answered)");
      } else if (theirs.session_id != peer.session.id()) {
        lose(rank, PeerDownReason::kSilent,
             "rank " + std::to_string(rank) + " and this side no longer hold the same session");
      } else {
        lose(rank, PeerDownReason::kProtocol,
             "rank " + std::to_string(rank) + " delivered " + std::to_string(theirs.received) +
                 " messages, more or fewer than this side can resume from");
      }
    }
    peer.session.restart(theirs.incarnation, fresh_id);
  }
  if (options_.peer_timeout.count() > 0) {
    if (Status limited = tcp::limit_unacknowledged(socket, options_.peer_timeout); !limited.ok()) {
      log_limited(spdlog::level::warn, LogTopic::kUp, rank,
                  "transport: rank " + std::to_string(rank) + " (" + remote +
                      "): a silent peer is noticed later: " + limited.message());
    }
  }
  if (!dialed) {
    // Where the peer listens, as it says itself: the address it connects from, at the port its
    // handshake names. Looked at once now: only an address that answered while the peer was
    // there counts when it refuses later (look_for).
    error_code ec;
    const auto from = socket.remote_endpoint(ec);
    peer.listens_at = std::nullopt;
    if (!ec && theirs.listen_port != 0 && !from.address().is_unspecified()) {
      peer.listens_at = asio::ip::tcp::endpoint(from.address(), theirs.listen_port);
    }
    peer.listener_seen = false;
  }
  auto connection = std::make_shared<tcp::PeerConnection>(std::move(socket), rank, peer.session,
                                                          write_from, options_.max_message_bytes,
                                                          counters_, peer.meter, *this);
  std::shared_ptr<tcp::PeerConnection> previous;
  {
    std::lock_guard lock(peers_mutex_);
    previous = std::exchange(peer.connection, connection);
    ++counters_.connects;
    if (previous) ++counters_.disconnects;
    if (!resumed) ++counters_.peers_up;  // with the table change: stats agree with peer_up()
  }
  if (previous) previous->close("replaced by a new connection from the same rank");
  peer.last_heard = Clock::now();
  if (resumed) {
    const uint64_t held = peer.session.held_bytes();
    log_limited(spdlog::level::info, LogTopic::kUp, rank,
                "transport: rank " + std::to_string(rank) + " reconnected (" + remote +
                    "), the session goes on: " + std::to_string(held) + " bytes to write again");
  } else {
    log_limited(spdlog::level::info, LogTopic::kUp, rank,
                "transport: rank " + std::to_string(rank) + " up (" + remote + ")");
    if (handlers_.on_peer) handlers_.on_peer(rank, true);
  }
  connection->start();
  if (!dialed) look_for(rank);
}

void TcpTransport::Mesh::lose(uint32_t rank, PeerDownReason reason, const std::string& why) {
  Peer& peer = *peers_[rank];
  if (stopping_ || !peer.session.open()) return;
  {
    std::lock_guard lock(peers_mutex_);
    peer.session.close();
    --counters_.peers_up;
  }
  ++counters_.peers_down[static_cast<std::size_t>(reason)];
  log_limited(spdlog::level::warn, LogTopic::kDown, rank,
              "transport: rank " + std::to_string(rank) + " down (" +
                  peer_down_reason_name(reason) + "): " + why);
  if (handlers_.on_peer) handlers_.on_peer(rank, false);
}

std::shared_ptr<tcp::PeerConnection> TcpTransport::Mesh::connection_of(uint32_t rank) const {
  std::lock_guard lock(peers_mutex_);
  return peers_[rank]->connection;
}

bool TcpTransport::Mesh::deliver(uint32_t rank, MessageBytes&& message) {
  return !handlers_.on_message || handlers_.on_message(rank, std::move(message));
}

void TcpTransport::Mesh::connection_closed(tcp::PeerConnection& connection,
                                           const std::string& reason,
                                           std::optional<PeerDownReason> lost) {
  const uint32_t rank = connection.rank();
  Peer& peer = *peers_[rank];
  if (stopping_) return;  // the peers closing after this side's goodbye
  {
    std::lock_guard lock(peers_mutex_);
    if (peer.connection.get() != &connection) return;  // replaced, or stop() took it
    peer.connection.reset();
    ++counters_.disconnects;
  }
  peer.last_heard = std::max(peer.last_heard, connection.last_heard());
  if (lost) {
    lose(rank, *lost, reason);
  } else if (peer.session.open()) {
    log_limited(spdlog::level::warn, LogTopic::kLost, rank,
                "transport: connection to rank " + std::to_string(rank) + " lost: " + reason +
                    "; reconnecting, the session is kept" +
                    (options_.peer_timeout.count() > 0
                         ? " for " + std::to_string(options_.peer_timeout.count()) + " ms"
                         : std::string()));
  }
  if (rank < options_.rank) {
    dialers_[rank]->redial();
  } else if (peer.session.open()) {
    look_for(rank);
  }
}

void TcpTransport::Mesh::look_for(uint32_t rank) {
  Peer& peer = *peers_[rank];
  if (stopping_ || peer.looking || !peer.listens_at) return;
  peer.looking = true;
  peer.last_look = Clock::now();
  auto socket = std::make_shared<asio::ip::tcp::socket>(*io_);
  auto deadline = std::make_shared<asio::steady_timer>(*io_, options_.connect_timeout);
  deadline->async_wait([socket](const error_code& wait_ec) {
    error_code ignored;
    if (!wait_ec) socket->close(ignored);
  });
  socket->async_connect(*peer.listens_at, [this, rank, socket,
                                           deadline](const error_code& connect_ec) {
    deadline->cancel();
    Peer& looked = *peers_[rank];
    looked.looking = false;
    error_code ignored;
    socket->close(ignored);
    if (!connect_ec) {
      looked.listener_seen = true;
    } else if (connect_ec == asio::error::connection_refused && looked.listener_seen &&
               !connection_of(rank)) {
      lose(rank, PeerDownReason::kRefused,
           "its connection closed and its listener at " + looked.listens_at->address().to_string() +
               ":" + std::to_string(looked.listens_at->port()) +
               ", which answered before, refuses connections: the gateway is gone");
    }
  });
}

Status TcpTransport::Mesh::send(uint32_t to_rank, Message message) {
  GRADGATE_RETURN_IF_ERROR(check_send(to_rank, options_.rank, options_.peers.size(), message,
                                      options_.max_message_bytes));
  // Under the lock so that stop() cannot tear the peers down meanwhile.
  std::lock_guard lock(peers_mutex_);
  if (to_rank >= peers_.size()) {
    return Status(ErrorCode::kUnavailable,
                  "transport: rank " + std::to_string(to_rank) + " is not connected");
  }
  Peer& peer = *peers_[to_rank];
  if (Status held = peer.session.append(std::move(message)); !held.ok()) {
    if (held.code() == ErrorCode::kUnavailable) {
      return Status(ErrorCode::kUnavailable,
                    "transport: rank " + std::to_string(to_rank) + " is not connected");
    }
    return held;
  }
  if (peer.connection) peer.connection->kick();
  return {};
}

void TcpTransport::Mesh::update_peers(const std::vector<Endpoint>& peers) {
  std::lock_guard lock(lifecycle_mutex_);
  if (state_ != State::kRunning) return;
  asio::post(*io_, [this, peers] {
    for (uint32_t rank = 0; rank < options_.rank && rank < peers.size(); ++rank) {
      const Endpoint& now = peers[rank];
      if (now.host.empty() || now.port == 0 || now == options_.peers[rank]) continue;
      spdlog::info("transport: rank {} moved from {} to {}", rank, options_.peers[rank].to_string(),
                   now.to_string());
      options_.peers[rank] = now;
      dialers_[rank]->retarget(now);
    }
  });
}

bool TcpTransport::Mesh::peer_up(uint32_t rank) const {
  std::lock_guard lock(peers_mutex_);
  return rank < peers_.size() && rank != options_.rank && peers_[rank]->session.open();
}

TransportStats TcpTransport::Mesh::stats() const {
  TransportStats stats = counters_.snapshot();
  std::lock_guard lock(peers_mutex_);
  for (const auto& peer : peers_) stats.queued_bytes += peer->session.held_bytes();
  return stats;
}

void TcpTransport::Mesh::stop() {
  std::lock_guard lock(lifecycle_mutex_);
  if (state_ == State::kStopped) return;
  const bool running = state_ == State::kRunning;
  state_ = State::kStopped;
  stopping_ = true;
  if (running) say_goodbyes();
  if (io_) io_->stop();
  if (thread_.joinable()) thread_.join();
  // The I/O thread is gone: tear down here, then destroy the pending handlers with the context.
  std::vector<std::shared_ptr<tcp::PeerConnection>> open;
  {
    std::lock_guard peers_lock(peers_mutex_);
    for (const auto& peer : peers_) {
      if (peer->connection) open.push_back(std::move(peer->connection));
      peer->session.close();
    }
  }
  for (const auto& connection : open) connection->close_quietly();
  counters_.peers_up = 0;
  open.clear();
  dialers_.clear();
  accept_retry_.reset();
  probe_timer_.reset();
  liveness_timer_.reset();
  acceptor_.reset();
  work_.reset();
  io_.reset();
}

void TcpTransport::Mesh::say_goodbyes() {
  // Shared with the callbacks, which may outlive a wait that timed out.
  struct Goodbyes {
    std::mutex mutex;
    std::condition_variable written;
    size_t pending = 1;  // the connections' goodbyes, + 1 until every one is on its way
    void one_written() {
      std::lock_guard lock(mutex);
      if (--pending == 0) written.notify_all();
    }
  };
  auto goodbyes = std::make_shared<Goodbyes>();
  asio::post(*io_, [this, goodbyes] {
    // Nothing new comes up from now on: no connection is accepted (stopping_ makes handshakes
    // under way and dials fail).
    error_code ignored;
    acceptor_->close(ignored);
    std::vector<std::shared_ptr<tcp::PeerConnection>> open;
    {
      std::lock_guard peers_lock(peers_mutex_);
      for (const auto& peer : peers_) {
        if (peer->connection) open.push_back(peer->connection);
      }
    }
    {
      std::lock_guard lock(goodbyes->mutex);
      goodbyes->pending += open.size();
    }
    for (const auto& connection : open) {
      connection->say_goodbye([goodbyes] { goodbyes->one_written(); });
    }
    goodbyes->one_written();
  });
  // Bounded: a goodbye behind a large message on a slow link is not waited for (the peer then
  // notices the closed connection and the refused redial, or the silence).
  std::unique_lock lock(goodbyes->mutex);
  goodbyes->written.wait_for(lock, kGoodbyeWait, [&] { return goodbyes->pending == 0; });
}

void TcpTransport::Mesh::every(asio::steady_timer& timer, std::chrono::milliseconds interval,
                               void (Mesh::*tick)()) {
  timer.expires_after(interval);
  timer.async_wait([this, &timer, interval, tick](const error_code& ec) {
    if (ec) return;
    (this->*tick)();
    every(timer, interval, tick);
  });
}

void TcpTransport::Mesh::check_liveness() {
  const auto now = Clock::now();
  const auto silence_limit = options_.peer_timeout / 2;
  for (uint32_t rank = 0; rank < peers_.size(); ++rank) {
    if (rank == options_.rank) continue;
    Peer& peer = *peers_[rank];
    if (auto connection = connection_of(rank)) {
      // Silent: no byte of the peer's arrived and its kernel acknowledged none of this side's
      // (which writes at least a heartbeat a second) for half the peer timeout, or nothing
      // arrived for all of it (its kernel acknowledges, but the peer itself is stuck, or the way
      // back is cut). A slow link moves one or the other; a flow that waits out the kernel's
      // retransmission backoff while the other direction is acknowledged is given the time.
      const auto quiet = now - connection->last_heard();
      if (silence_limit.count() > 0 &&
          ((quiet > silence_limit && now - connection->last_acknowledged() > silence_limit) ||
           quiet > options_.peer_timeout)) {
        connection->close(
            "nothing arrived for " +
            std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(quiet).count()) +
            " ms");
      } else if (now - connection->last_written() >= heartbeat_) {
        connection->heartbeat();
      }
    } else if (options_.peer_timeout.count() > 0 && peer.session.open() &&
               now - peer.last_heard > options_.peer_timeout) {
      lose(rank, PeerDownReason::kSilent,
           "nothing of it moved for " + std::to_string(options_.peer_timeout.count()) +
               " ms and no connection came back");
    } else if (rank > options_.rank && peer.session.open() && now - peer.last_look >= heartbeat_) {
      look_for(rank);
    }
  }
}

void TcpTransport::Mesh::probe_links() {
  const auto now = Clock::now();
  for (uint32_t rank = 0; rank < peers_.size(); ++rank) {
    auto connection = rank == options_.rank ? nullptr : connection_of(rank);
    if (!connection) continue;
    LinkMeter& meter = peers_[rank]->meter;
    meter.set_rtt(connection->rtt_seconds());
    if (now - connection->last_measurable_send() < 2 * options_.probe_interval) continue;
    // Sized from the reverse direction's estimate, the best guess of this one: about 20 ms of
    // transfer, within what can be timed and what a slow link can spare.
    const double goodput = meter.estimate(rank, now).goodput_bytes_per_second;
    const double wanted = goodput > 0.0 ? goodput * 0.02 : tcp::PeerConnection::kMaxProbeBytes;
    connection->enqueue_probe(static_cast<uint32_t>(std::clamp<double>(
        wanted, LinkMeter::kMinMeasuredBytes, tcp::PeerConnection::kMaxProbeBytes)));
  }
}

std::vector<LinkEstimate> TcpTransport::Mesh::links() const {
  std::vector<LinkEstimate> links;
  const auto now = Clock::now();
  std::lock_guard lock(peers_mutex_);
  for (uint32_t rank = 0; rank < peers_.size(); ++rank) {
    if (rank != options_.rank) links.push_back(peers_[rank]->meter.estimate(rank, now));
  }
  return links;
}

void TcpTransport::Mesh::log_limited(spdlog::level::level_enum level, LogTopic topic, uint32_t rank,
                                     const std::string& message) {
  if (!spdlog::should_log(level)) return;
  const std::optional<uint64_t> suppressed = throttle_.admit(throttle_key(topic, rank));
  if (!suppressed) return;
  if (*suppressed == 0) {
    spdlog::log(level, "{}", message);
  } else {
    spdlog::log(level, "{} ({} similar lines suppressed)", message, *suppressed);
  }
}

TcpTransport::TcpTransport(TcpTransportOptions options)
    : rank_(options.rank), mesh_(std::make_unique<Mesh>(std::move(options))) {}

TcpTransport::~TcpTransport() = default;

Status TcpTransport::start(Handlers handlers) { return mesh_->start(std::move(handlers)); }
void TcpTransport::stop() { mesh_->stop(); }
Status TcpTransport::send(uint32_t to_rank, Message message) {
  return mesh_->send(to_rank, std::move(message));
}
bool TcpTransport::peer_up(uint32_t rank) const { return mesh_->peer_up(rank); }
void TcpTransport::update_peers(const std::vector<Endpoint>& peers) { mesh_->update_peers(peers); }
bool TcpTransport::dials(uint32_t rank) const { return rank < rank_; }
TransportStats TcpTransport::stats() const { return mesh_->stats(); }
std::vector<LinkEstimate> TcpTransport::links() const { return mesh_->links(); }
uint16_t TcpTransport::listen_port() const { return mesh_->listen_port(); }

}  // namespace gradgate::gateway
