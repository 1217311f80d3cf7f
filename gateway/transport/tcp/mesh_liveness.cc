#include "gateway/transport/tcp/mesh.h"

#include <algorithm>
#include <string>

namespace gradgate::gateway {

namespace asio = boost::asio;
using boost::system::error_code;

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

}  // namespace gradgate::gateway
