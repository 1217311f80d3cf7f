// The TCP implementation of Transport: persistent connections between the gateways of one job,
// on Boost.Asio with one I/O thread owned by the transport.
//
// Every pair of gateways shares exactly one connection, dialed by the higher rank (a gateway
// accepts connections from higher ranks and dials every lower one). Each connection opens with
// a handshake (magic "GGT1", protocol version, job id, rank, and the session it carries on) and
// then carries length-prefixed frames both ways. Messages travel in a session per peer
// (tcp/peer_session.h) that outlives connections: a connection that breaks (a reset, a timeout,
// a restarted NIC) is redialed by its dialing side with exponential backoff, and the messages
// the peer had not acknowledged are written again, so the layer above sees nothing of it. A peer
// is reported down only when its session ends: it restarted (another incarnation answers), it
// said it is stopping, its address refuses connections, it broke the protocol, or nothing of it
// moved for peer_timeout (docs/transport.md#liveness). The wire format and the counters are
// described in docs/transport.md.
//
// Threads: send(), peer_up(), peer_down_count() and stats() may be called from any thread and
// never block on I/O.
// Handlers run on the transport's thread; stop() must not be called from a handler.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/net/endpoint.h"
#include "gateway/transport/transport.h"

namespace gradgate::gateway {

struct TcpTransportOptions {
  uint64_t job_id = 0;
  uint32_t rank = 0;                 // this gateway
  std::vector<net::Endpoint> peers;  // every gateway's address by rank (own entry ignored)
  net::Endpoint listen;              // where to accept; port 0 = any free port, host "" = any
  std::chrono::milliseconds connect_timeout{2000};  // per dial attempt and per handshake
  std::chrono::milliseconds reconnect_min{50}, reconnect_max{2000};  // backoff doubles
  /// Per peer: framed bytes held until the peer acknowledges them (written or not).
  uint64_t send_queue_bytes = 512ull << 20;
  uint64_t max_message_bytes = 1ull << 30;  // at most 2^31 - 1 (the length prefix's 31 bits)
  /// How often links that carried nothing measurable are probed (link_meter.h); 0: never.
  std::chrono::milliseconds probe_interval{1000};
  /// A peer from which nothing arrived for this long (no bytes on its connection, no connection
  /// re-established) is reported down. A connection silent for half of it is closed and dialed
  /// again, and one whose sent bytes stay unacknowledged for all of it is closed by the kernel
  /// (tcp/silence.h); each side writes a heartbeat when it has written nothing for an eighth of
  /// it (at most a second). 0: only a restart, a goodbye, a refusal or a protocol error end a
  /// session, and the kernel's own limits (many minutes) apply.
  std::chrono::milliseconds peer_timeout{20000};
  /// When set, `peers` only gives the job's size: start() calls it once the listener is bound
  /// (with the bound port) and before dialing, and dials the addresses it returns (by rank). For
  /// membership that comes from elsewhere (the controller). Its error fails start().
  std::function<Result<std::vector<net::Endpoint>>(uint16_t listen_port)> resolve_peers;
};

class TcpTransport final : public Transport {
 public:
  explicit TcpTransport(TcpTransportOptions options);
  ~TcpTransport() override;  // stops
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  /// Binds the listener (SO_REUSEADDR), picks this start's incarnation, starts the I/O thread and
  /// dials the lower ranks.
  /// kInvalidArgument for unusable options, kUnavailable when the address cannot be bound,
  /// kAborted when called twice or after stop().
  Status start(Handlers handlers) override;
  /// Joins the I/O thread and closes every connection, telling each peer it is stopping (a
  /// goodbye, unless a frame was half written); reports no peer going down. Idempotent.
  void stop() override;
  Status send(uint32_t to_rank, Message message) override;
  bool peer_up(uint32_t rank) const override;
  uint64_t peer_down_count(uint32_t rank) const override;
  /// Lower ranks whose address changed are dialed at the new one from their next attempt on.
  void update_peers(const std::vector<net::Endpoint>& peers) override;
  /// The lower ranks: the higher rank of a pair dials.
  bool dials(uint32_t rank) const override;
  TransportStats stats() const override;
  std::vector<LinkEstimate> links() const override;

  /// The bound port, valid after start() (useful when listening on port 0).
  uint16_t listen_port() const;

 private:
  class Mesh;
  uint32_t rank_;
  std::unique_ptr<Mesh> mesh_;
};

}  // namespace gradgate::gateway
