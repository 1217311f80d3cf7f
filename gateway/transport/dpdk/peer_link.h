// The DPDK transport's state for one peer: a reliable::Session that makes the peer's UDP
// datagrams a reliable message stream, and the rules that turn it into a Transport peer that is
// up or down.
//
// - Up: once a datagram of the peer's current session has been accepted. Until then, and then
//   every `hello_interval`, the link sends a hello (an ACK of what it holds: a valid reliable
//   packet, so it needs no packet type of its own) that tells the peer this side's epoch and
//   keeps an idle link's liveness visible.
// - Down: the session is lost (a message past its deadline, silence while data is outstanding,
//   a broken stream), nothing heard for `peer_timeout` although hellos flow, the handler rejected
//   a message, or the peer restarted (a new epoch: down and at once up again). A new session with
//   a new epoch replaces a lost one, so the peer can come back.
//
// Threads: send() and up() from any thread; everything else on the polling thread. A mutex
// guards the session; nothing that calls the transport's handlers runs under it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "gateway/transport/dpdk/udp_frame.h"
#include "gateway/transport/link_meter.h"
#include "gateway/transport/reliable/session.h"

namespace gradgate::gateway::dpdk {

using Clock = reliable::Clock;

/// Where a peer link writes the datagrams it sends (the transport: into mbufs).
class DatagramSink {
 public:
  /// Room for one datagram; empty when no buffer is free (the datagram is then lost, and the
  /// reliability layer sends it again).
  virtual std::span<std::byte> begin_datagram() = 0;
  /// The datagram just begun holds `bytes`.
  virtual void end_datagram(std::size_t bytes) = 0;

 protected:
  ~DatagramSink() = default;
};

/// What changed on a link in one service() call, for the transport to report outside the lock.
struct LinkEvents {
  bool came_up = false;
  bool restarted = false;              // the peer restarted: report it down and up again
  std::optional<std::string> lost;     // went down, and why
  std::vector<MessageBytes> messages;  // delivered, in order
};

/// Monotonic totals of a link across its sessions.
struct LinkTotals {
  uint64_t retransmits = 0;
  uint64_t messages_acknowledged = 0;
  uint64_t queued_bytes = 0;  // gauge
  uint64_t foreign = 0;       // datagrams of another job or other ranks
};

class PeerLink {
 public:
  struct Options {
    reliable::Config config;  // must pass reliable::check()
    uint64_t job_id = 0;
    uint32_t local_rank = 0;
    uint32_t peer_rank = 0;
    UdpAddress address;  // the peer's
    std::chrono::milliseconds hello_interval{100};
  };

  explicit PeerLink(const Options& options);

  /// Queues `message` (checked by the caller): kUnavailable while the peer is down,
  /// kResourceExhausted over the queue cap. Any thread.
  Status send(Message message);
  bool up() const { return up_.load(); }

  /// A datagram from the peer's address, sent from `mac`. Polling thread.
  void on_datagram(std::span<const std::byte> datagram, const MacAddress& mac,
                   Clock::time_point now);
  /// Reports what changed and writes the datagrams due now into `sink`. Polling thread.
  LinkEvents service(Clock::time_point now, DatagramSink& sink);
  /// Drops the session (a rejected message): the peer goes down. Polling thread.
  LinkEvents reset(const std::string& reason);
  /// The peer is now at `address` (restarted elsewhere): the session is dropped (the peer goes
  /// down) and its MAC learned again. Polling thread.
  LinkEvents move_to(const UdpAddress& address);

  const UdpAddress& address() const { return address_; }
  /// Broadcast until a frame from the peer shows its MAC. Polling thread.
  const MacAddress& mac() const { return mac_; }
  LinkTotals totals() const;
  /// This link's goodput and round-trip estimate. Any thread.
  LinkEstimate estimate(Clock::time_point now) const;

 private:
  void new_session_locked();
  void lose_locked(const std::string& reason, LinkEvents& events);
  void add_totals_locked();

  const Options options_;
  std::mt19937_64 epochs_;
  UdpAddress address_;  // polling thread
  MacAddress mac_ = kBroadcastMac;
  LinkMeter meter_;
  std::atomic<bool> up_{false};
  std::atomic<double> rtt_seconds_{0.0};

  mutable std::mutex mutex_;  // guards the members below
  std::unique_ptr<reliable::Session> session_;
  Clock::time_point last_heard_{};
  Clock::time_point next_hello_{};
  std::optional<Clock::time_point> receiving_since_;  // first datagram of the next message
  LinkTotals totals_;
  uint64_t session_retransmits_ = 0;  // the current session's, already in totals_
  uint64_t session_acknowledged_ = 0;
};

}  // namespace gradgate::gateway::dpdk
