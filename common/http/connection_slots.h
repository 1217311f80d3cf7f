// The connections an HttpServer serves at once (ServerOptions::max_connections), and which one
// gives way when they are all taken.
//
// A connection that waits for a request (an idle keep-alive connection, a client still sending,
// or one closing) holds its slot only until a new connection needs it: the new connection takes
// the slot of the one that has waited longest, which is closed. So clients that open connections
// and leave them idle cannot lock others (a kubelet's probe, Prometheus) out. Only when every
// connection is busy with a request (its handler, a deferred route's wait, its response) is a new
// one refused; refused connections are bounded too (as many as the limit), beyond that closed
// without an answer.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

namespace gradgate::http {

/// A connection that can be told to close because a new connection takes its slot. evict() runs
/// on the server's I/O thread.
class Evictable {
 public:
  virtual ~Evictable() = default;
  virtual void evict() = 0;
};

/// Thread-safe: slots are taken and connections evicted on the I/O thread; a connection gives its
/// slot back when destroyed, which may happen on another thread (a Responder's call).
class ConnectionSlots {
 public:
  using Ticket = uint64_t;

  explicit ConnectionSlots(uint32_t limit) : limit_(limit) {}
  uint32_t limit() const { return limit_; }

  /// A slot for a new connection: a free one, or the slot of the connection that has waited
  /// longest for a request, which is evicted (it no longer holds a slot: its give_back does
  /// nothing). Nothing when every connection is busy with a request.
  std::optional<Ticket> take();
  /// The holder of `ticket` waits for a request from now on and may be evicted until busy().
  void waiting(Ticket ticket, std::weak_ptr<Evictable> connection);
  /// The holder of `ticket` works on a request: it keeps its slot.
  void busy(Ticket ticket);
  void give_back(Ticket ticket);

  /// A place for a refused connection, which is answered 503; false beyond `limit` of them.
  bool take_refusal();
  void give_back_refusal();

 private:
  struct Holder {
    std::weak_ptr<Evictable> connection;
    std::optional<uint64_t> waiting_since;  // its place in waiting_ while it waits
  };

  const uint32_t limit_;
  std::mutex mutex_;
  std::map<Ticket, Holder> holders_;
  std::map<uint64_t, Ticket> waiting_;  // by when they started waiting: the oldest first
  Ticket next_ticket_ = 0;
  uint64_t next_wait_ = 0;
  uint32_t refusals_ = 0;
};

}  // namespace gradgate::http
