#include "gateway/transport/tcp_transport.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <random>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "common/net/listener.h"
#include "gateway/transport/send_checks.h"
#include "gateway/transport/tcp/mesh.h"

namespace gradgate::gateway {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// How long stop() waits for the goodbyes to be written.
constexpr std::chrono::milliseconds kGoodbyeWait{200};

uint64_t throttle_key(tcp::LogTopic topic, uint32_t rank) {
  return (static_cast<uint64_t>(topic) << 32) | rank;
}

}  // namespace

uint64_t tcp::random_nonzero() {
  std::random_device device;
  std::mt19937_64 generator(
      (static_cast<uint64_t>(device()) << 32) ^ device() ^
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  uint64_t incarnation = 0;
  while (incarnation == 0) incarnation = generator();
  return incarnation;
}

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
    const net::Endpoint& peer = options_.peers[rank];
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
  incarnation_ = tcp::random_nonzero();
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

void TcpTransport::Mesh::update_peers(const std::vector<net::Endpoint>& peers) {
  std::lock_guard lock(lifecycle_mutex_);
  if (state_ != State::kRunning) return;
  asio::post(*io_, [this, peers] {
    for (uint32_t rank = 0; rank < options_.rank && rank < peers.size(); ++rank) {
      const net::Endpoint& now = peers[rank];
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

uint64_t TcpTransport::Mesh::peer_down_count(uint32_t rank) const {
  std::lock_guard lock(peers_mutex_);
  return rank < peers_.size() && rank != options_.rank ? peers_[rank]->down_count : 0;
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
uint64_t TcpTransport::peer_down_count(uint32_t rank) const { return mesh_->peer_down_count(rank); }
void TcpTransport::update_peers(const std::vector<net::Endpoint>& peers) {
  mesh_->update_peers(peers);
}
bool TcpTransport::dials(uint32_t rank) const { return rank < rank_; }
TransportStats TcpTransport::stats() const { return mesh_->stats(); }
std::vector<LinkEstimate> TcpTransport::links() const { return mesh_->links(); }
uint16_t TcpTransport::listen_port() const { return mesh_->listen_port(); }

}  // namespace gradgate::gateway
