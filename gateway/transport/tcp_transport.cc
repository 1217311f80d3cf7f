#include "gateway/transport/tcp_transport.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>
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
#include "gateway/transport/tcp/silence.h"

namespace gradgate::gateway {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

constexpr std::chrono::milliseconds kAcceptRetryDelay{100};

// What a rate-limited log line is about; one throttle slot per topic and peer.
enum class LogTopic : uint64_t { kUp, kDown, kDial, kRefused, kAccept };

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

// The transport's state: the I/O thread, the listener, one dialer per lower rank and the
// current connection of every peer.
class TcpTransport::Mesh final : public tcp::ConnectionOwner {
 public:
  explicit Mesh(TcpTransportOptions options) : options_(std::move(options)) {}
  ~Mesh() { stop(); }

  Status start(Handlers handlers);
  void stop();
  Status send(uint32_t to_rank, Message message);
  bool peer_up(uint32_t rank) const;
  void update_peers(const std::vector<Endpoint>& peers);
  TransportStats stats() const { return counters_.snapshot(); }
  std::vector<LinkEstimate> links() const;
  uint16_t listen_port() const { return listen_port_; }

  bool deliver(uint32_t rank, MessageBytes&& message) override;
  void connection_closed(tcp::PeerConnection& connection, const std::string& reason) override;

 private:
  enum class State { kIdle, kRunning, kStopped };

  Status check_options() const;
  Status bind_listener();
  void accept_next();
  Status check_incoming(const tcp::Hello& theirs) const;
  void add_dialer(uint32_t rank);
  /// Every probe interval: refreshes each link's round-trip time and probes the links that
  /// carried nothing measurable for two intervals.
  void schedule_probes();
  void probe_links();
  void install(asio::ip::tcp::socket socket, uint32_t rank);
  void log_limited(spdlog::level::level_enum level, LogTopic topic, uint32_t rank,
                   const std::string& message);

  // peers filled in by start() when resolve_peers is set, changed by update_peers() on the
  // transport thread
  TcpTransportOptions options_;
  Handlers handlers_;
  TransportCounters counters_;
  LogThrottle throttle_;  // transport thread only
  uint16_t listen_port_ = 0;

  std::mutex lifecycle_mutex_;  // serialises start() and stop()
  State state_ = State::kIdle;
  std::atomic<bool> stopping_{false};

  // Declared before everything that does I/O on it, so that it is destroyed last.
  std::unique_ptr<asio::io_context> io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::unique_ptr<asio::ip::tcp::acceptor> acceptor_;
  std::unique_ptr<asio::steady_timer> accept_retry_;
  std::unique_ptr<asio::steady_timer> probe_timer_;
  std::vector<std::unique_ptr<LinkMeter>> meters_;     // by rank; made before the I/O thread
  std::vector<std::unique_ptr<tcp::Dialer>> dialers_;  // by rank; only lower ranks have one
  std::thread thread_;

  mutable std::mutex peers_mutex_;
  std::vector<std::shared_ptr<tcp::PeerConnection>> peers_;  // by rank; null while down
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
      options_.reconnect_min.count() <= 0 || options_.reconnect_max < options_.reconnect_min) {
    return Status(ErrorCode::kInvalidArgument,
                  "transport: send_queue_bytes, connect_timeout and reconnect_min must be positive "
                  "and reconnect_max at least reconnect_min");
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
  {
    std::lock_guard peers_lock(peers_mutex_);
    peers_.assign(options_.peers.size(), nullptr);
  }
  accept_retry_ = std::make_unique<asio::steady_timer>(*io_);
  accept_next();
  meters_.clear();
  for (size_t rank = 0; rank < options_.peers.size(); ++rank) {
    meters_.push_back(std::make_unique<LinkMeter>());
  }
  probe_timer_ = std::make_unique<asio::steady_timer>(*io_);
  if (options_.probe_interval.count() > 0) schedule_probes();
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
    tcp::run_handshake(
        std::move(socket), tcp::HandshakeRole::kAcceptor, {options_.job_id, options_.rank},
        options_.connect_timeout,
        [this](const tcp::Hello& theirs) { return check_incoming(theirs); },
        [this, remote](Result<tcp::Hello> theirs, asio::ip::tcp::socket handshaken) {
          if (theirs.ok()) return install(std::move(handshaken), theirs->rank);
          if (theirs.status().code() == ErrorCode::kIncompatible) ++counters_.foreign;
          log_limited(
              spdlog::level::warn, LogTopic::kRefused, 0,
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

void TcpTransport::Mesh::add_dialer(uint32_t rank) {
  tcp::Dialer::Options dial;
  dial.ours = {options_.job_id, options_.rank};
  dial.target_rank = rank;
  dial.target = options_.peers[rank];
  dial.connect_timeout = options_.connect_timeout;
  dial.reconnect_min = options_.reconnect_min;
  dial.reconnect_max = options_.reconnect_max;
  dialers_[rank] = std::make_unique<tcp::Dialer>(
      *io_, std::move(dial),
      [this, rank](asio::ip::tcp::socket socket) { install(std::move(socket), rank); },
      [this, rank](const Status& status, const Endpoint& dialed) {
        if (status.code() == ErrorCode::kIncompatible) ++counters_.foreign;
        log_limited(spdlog::level::warn, LogTopic::kDial, rank,
                    "transport: dialing rank " + std::to_string(rank) + " at " +
                        dialed.to_string() + " failed: " + status.message());
      });
  dialers_[rank]->dial();
}

void TcpTransport::Mesh::install(asio::ip::tcp::socket socket, uint32_t rank) {
  const std::string remote = describe(socket);
  if (options_.peer_timeout.count() > 0) {
    if (Status limited = tcp::limit_silence(socket, options_.peer_timeout); !limited.ok()) {
      log_limited(spdlog::level::warn, LogTopic::kUp, rank,
                  "transport: rank " + std::to_string(rank) + " (" + remote +
                      "): a silent peer goes unnoticed: " + limited.message());
    }
  }
  auto connection = std::make_shared<tcp::PeerConnection>(
      std::move(socket), rank,
      tcp::PeerConnection::Limits{options_.send_queue_bytes, options_.max_message_bytes}, counters_,
      *meters_[rank], *this);
  std::shared_ptr<tcp::PeerConnection> previous;
  {
    std::lock_guard lock(peers_mutex_);
    previous = peers_[rank];
  }
  if (previous) previous->close("replaced by a new connection from the same rank");
  {
    std::lock_guard lock(peers_mutex_);
    peers_[rank] = connection;
    ++counters_.connects;  // counted with the table change, so that stats agree with peer_up()
    ++counters_.peers_up;
  }
  log_limited(spdlog::level::info, LogTopic::kUp, rank,
              "transport: rank " + std::to_string(rank) + " up (" + remote + ")");
  if (handlers_.on_peer) handlers_.on_peer(rank, true);
  connection->start();
}

bool TcpTransport::Mesh::deliver(uint32_t rank, MessageBytes&& message) {
  return !handlers_.on_message || handlers_.on_message(rank, std::move(message));
}

void TcpTransport::Mesh::connection_closed(tcp::PeerConnection& connection,
                                           const std::string& reason) {
  const uint32_t rank = connection.rank();
  {
    std::lock_guard lock(peers_mutex_);
    if (rank >= peers_.size() || peers_[rank].get() != &connection) return;  // stop() took it
    peers_[rank].reset();
    --counters_.peers_up;
    ++counters_.disconnects;
  }
  log_limited(spdlog::level::warn, LogTopic::kDown, rank,
              "transport: rank " + std::to_string(rank) + " down: " + reason);
  if (handlers_.on_peer) handlers_.on_peer(rank, false);
  if (rank < options_.rank) dialers_[rank]->redial();
}

Status TcpTransport::Mesh::send(uint32_t to_rank, Message message) {
  GRADGATE_RETURN_IF_ERROR(check_send(to_rank, options_.rank, options_.peers.size(), message,
                                      options_.max_message_bytes));
  // Enqueue under the lock so that stop() cannot tear the connection down meanwhile.
  std::lock_guard lock(peers_mutex_);
  if (to_rank >= peers_.size() || !peers_[to_rank]) {
    return Status(ErrorCode::kUnavailable,
                  "transport: rank " + std::to_string(to_rank) + " is not connected");
  }
  return peers_[to_rank]->enqueue(std::move(message));
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
  return rank < peers_.size() && peers_[rank] != nullptr;
}

void TcpTransport::Mesh::stop() {
  std::lock_guard lock(lifecycle_mutex_);
  if (state_ == State::kStopped) return;
  state_ = State::kStopped;
  stopping_ = true;
  if (io_) io_->stop();
  if (thread_.joinable()) thread_.join();
  // The I/O thread is gone: tear down here, then destroy the pending handlers with the context.
  std::vector<std::shared_ptr<tcp::PeerConnection>> open;
  {
    std::lock_guard peers_lock(peers_mutex_);
    open.swap(peers_);
  }
  for (const auto& connection : open) {
    if (connection) connection->close("transport stopped");
  }
  counters_.peers_up = 0;
  open.clear();
  dialers_.clear();
  accept_retry_.reset();
  probe_timer_.reset();
  acceptor_.reset();
  work_.reset();
  io_.reset();
}

void TcpTransport::Mesh::schedule_probes() {
  probe_timer_->expires_after(options_.probe_interval);
  probe_timer_->async_wait([this](const error_code& ec) {
    if (ec) return;
    probe_links();
    schedule_probes();
  });
}

void TcpTransport::Mesh::probe_links() {
  std::vector<std::shared_ptr<tcp::PeerConnection>> open;
  {
    std::lock_guard lock(peers_mutex_);
    open = peers_;
  }
  const auto now = LinkMeter::Clock::now();
  for (const auto& connection : open) {
    if (!connection) continue;
    LinkMeter& meter = *meters_[connection->rank()];
    meter.set_rtt(connection->rtt_seconds());
    if (now - connection->last_measurable_send() < 2 * options_.probe_interval) continue;
    // Sized from the reverse direction's estimate, the best guess of this one: about 20 ms of
    // transfer, within what can be timed and what a slow link can spare.
    const double goodput = meter.estimate(connection->rank(), now).goodput_bytes_per_second;
    const double wanted = goodput > 0.0 ? goodput * 0.02 : tcp::PeerConnection::kMaxProbeBytes;
    connection->enqueue_probe(static_cast<uint32_t>(std::clamp<double>(
        wanted, LinkMeter::kMinMeasuredBytes, tcp::PeerConnection::kMaxProbeBytes)));
  }
}

std::vector<LinkEstimate> TcpTransport::Mesh::links() const {
  std::vector<LinkEstimate> links;
  const auto now = LinkMeter::Clock::now();
  for (uint32_t rank = 0; rank < meters_.size(); ++rank) {
    if (rank != options_.rank) links.push_back(meters_[rank]->estimate(rank, now));
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
