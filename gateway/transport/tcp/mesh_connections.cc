#include "gateway/transport/tcp/mesh.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>
#include <boost/asio/error.hpp>

#include "gateway/transport/tcp/silence.h"

namespace gradgate::gateway {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

constexpr std::chrono::milliseconds kAcceptRetryDelay{100};

std::string describe(const asio::ip::tcp::socket& socket) {
  error_code ec;
  const auto remote = socket.remote_endpoint(ec);
  if (ec) return "unknown address";
  return remote.address().to_string() + ":" + std::to_string(remote.port());
}

}  // namespace

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
                    .session_id = resume ? session.id() : tcp::random_nonzero(),
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
      [this, rank](const Status& status, const net::Endpoint& dialed, bool refused) {
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
    restart_session(rank, theirs, fresh_id);
  }
  if (options_.peer_timeout.count() > 0) {
    if (Status limited = tcp::limit_unacknowledged(socket, options_.peer_timeout); !limited.ok()) {
      log_limited(spdlog::level::warn, LogTopic::kUp, rank,
                  "transport: rank " + std::to_string(rank) + " (" + remote +
                      "): a silent peer is noticed later: " + limited.message());
    }
  }
  if (!dialed) note_listener(peer, socket, theirs);
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

void TcpTransport::Mesh::restart_session(uint32_t rank, const tcp::Hello& theirs,
                                         uint64_t fresh_id) {
  tcp::PeerSession& session = peers_[rank]->session;
  if (session.open()) {
    // Another incarnation: the peer restarted. The same one under another session: one of the
    // two sides had given the session up (nothing of the other moved for its peer timeout, or
    // a handshake broke off half way). The same session: its delivered count is outside what
    // was sent, which breaks the protocol.
    if (theirs.incarnation != session.peer_incarnation()) {
      lose(rank, PeerDownReason::kRestarted,
           "rank " + std::to_string(rank) + " restarted (a new incarnation answered)");
    } else if (theirs.session_id != session.id()) {
      lose(rank, PeerDownReason::kSilent,
           "rank " + std::to_string(rank) + " and this side no longer hold the same session");
    } else {
      lose(rank, PeerDownReason::kProtocol,
           "rank " + std::to_string(rank) + " delivered " + std::to_string(theirs.received) +
               " messages, more or fewer than this side can resume from");
    }
  }
  session.restart(theirs.incarnation, fresh_id);
}

void TcpTransport::Mesh::note_listener(Peer& peer, const asio::ip::tcp::socket& socket,
                                       const tcp::Hello& theirs) {
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

void TcpTransport::Mesh::lose(uint32_t rank, PeerDownReason reason, const std::string& why) {
  Peer& peer = *peers_[rank];
  if (stopping_ || !peer.session.open()) return;
  {
    std::lock_guard lock(peers_mutex_);
    peer.session.close();
    ++peer.down_count;
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

}  // namespace gradgate::gateway
