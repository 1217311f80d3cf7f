// The TCP implementation of Transport: persistent connections between the gateways of one job,
// on Boost.Asio with one I/O thread owned by the transport.
//
// Every pair of gateways shares exactly one connection, dialed by the higher rank (a gateway
// accepts connections from higher ranks and dials every lower one). Each connection opens with
// a handshake (magic "GGT1", protocol version, job id, rank) and then carries length-prefixed
// messages both ways. A lost connection is redialed by its dialing side with exponential
// backoff until stop(); a new connection from a rank that already has one replaces it (the peer
// restarted). Messages still queued on a connection that drops are discarded: the layer above
// has its own timeouts. The wire format and the counters are described in docs/transport.md.
//
// Threads: send(), peer_up() and stats() may be called from any thread and never block on I/O.
// Handlers run on the transport's thread; stop() must not be called from a handler.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "gateway/transport/endpoint.h"
#include "gateway/transport/transport.h"

namespace gradgate::gateway {

struct TcpTransportOptions {
  uint64_t job_id = 0;
  uint32_t rank = 0;            // this gateway
  std::vector<Endpoint> peers;  // every gateway's address by rank (own entry ignored)
  Endpoint listen;              // where to accept; port 0 = any free port, host "" = any
  std::chrono::milliseconds connect_timeout{2000};  // per dial attempt and per handshake
  std::chrono::milliseconds reconnect_min{50}, reconnect_max{2000};  // backoff doubles
  uint64_t send_queue_bytes = 512ull << 20;                          // per peer, framed bytes
  uint64_t max_message_bytes = 1ull << 30;  // at most 2^31 - 1 (the length prefix's 31 bits)
  /// How often links that carried nothing measurable are probed (link_meter.h); 0: never.
  std::chrono::milliseconds probe_interval{1000};
  /// A connection over which the peer acknowledged nothing for this long is closed and the peer
  /// reported down (tcp/silence.h); 0: the kernel's own limits (many minutes).
  std::chrono::milliseconds peer_timeout{10000};
  /// When set, `peers` only gives the job's size: start() calls it once the listener is bound
  /// (with the bound port) and before dialing, and dials the addresses it returns (by rank). For
  /// membership that comes from elsewhere (the controller). Its error fails start().
  std::function<Result<std::vector<Endpoint>>(uint16_t listen_port)> resolve_peers;
};

class TcpTransport final : public Transport {
 public:
  explicit TcpTransport(TcpTransportOptions options);
  ~TcpTransport() override;  // stops
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  /// Binds the listener (SO_REUSEADDR), starts the I/O thread and dials the lower ranks.
  /// kInvalidArgument for unusable options, kUnavailable when the address cannot be bound,
  /// kAborted when called twice or after stop().
  Status start(Handlers handlers) override;
  /// Closes every connection, joins the I/O thread; reports no peer going down. Idempotent.
  void stop() override;
  Status send(uint32_t to_rank, Message message) override;
  bool peer_up(uint32_t rank) const override;
  /// Lower ranks whose address changed are dialed at the new one from their next attempt on.
  void update_peers(const std::vector<Endpoint>& peers) override;
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
