// The connections an HttpServer serves at once (ServerOptions::max_connections), and which one
// gives way when they are all taken.
//
// A connection that waits for its client holds its slot only until a new connection needs it:
// the new connection takes the slot of the one that has waited longest and closes it. Idle
// keep-alive connections give way first, then connections closing after an answer (whose client
// may not have read it yet); never one with a request that arrived and is not answered yet, nor
// one busy with a request (its handler, a deferred route's wait, its response). A part of a
// request does not count: so clients that open connections and leave them idle, or send a few
// bytes and stall, cannot lock others (a kubelet's probe, Prometheus) out. When no connection
// can give way, the new one is refused; refused connections are bounded too (as many as the
// limit), beyond that closed without an answer.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace gradgate::http {

/// A connection that can be told to close because a new connection takes its slot. Its members
/// run on the server's I/O thread.
class Evictable {
 public:
  virtual ~Evictable() = default;
  /// Whether a request of its client arrived and is not answered yet: bytes unread in its socket,
  /// or a whole request read whose handler has not run.
  virtual bool has_input() const = 0;
  /// Closes it now, without an answer.
  virtual void evict() = 0;
};

/// Thread-safe: slots are taken and connections evicted on the I/O thread; a connection gives its
/// slot back when destroyed, which may happen on another thread (a Responder's call).
class ConnectionSlots {
 public:
  using Ticket = uint64_t;
  /// What a connection waits for: its next request (idle), or its client's close after an answer.
  enum class Wait { kRequest, kClose };

  explicit ConnectionSlots(uint32_t limit) : limit_(limit) {}
  uint32_t limit() const { return limit_; }

  /// A slot for a new connection: a free one, or the slot of a connection that gives way (above),
  /// which is evicted (it no longer holds a slot: its give_back does nothing). Nothing when no
  /// connection can give way. On the I/O thread.
  std::optional<Ticket> take();
  /// The holder of `ticket` waits for its client from now on and may give way until busy().
  void waiting(Ticket ticket, Wait wait, std::weak_ptr<Evictable> connection);
  /// The holder of `ticket` works on a request: it keeps its slot.
  void busy(Ticket ticket);
  void give_back(Ticket ticket);

  /// A place for a refused connection, which is answered 503; false beyond `limit` of them.
  bool take_refusal();
  void give_back_refusal();

 private:
  struct Holder {
    std::weak_ptr<Evictable> connection;
    std::optional<Wait> wait;  // while it waits
    uint64_t since = 0;        // its place in waiting_ while it waits
  };
  struct Candidate {
    Ticket ticket;
    uint64_t since;
    std::weak_ptr<Evictable> connection;
  };

  /// The waiting connections that may give way, in the order they would (caller holds mutex_).
  std::vector<Candidate> candidates_locked() const;
  /// Takes the slot of `candidate` if it still waits as it did when listed; a new ticket.
  std::optional<Ticket> take_from_locked(const Candidate& candidate);
  Ticket add_holder_locked();

  const uint32_t limit_;
  std::mutex mutex_;
  std::map<Ticket, Holder> holders_;
  std::map<uint64_t, Ticket> waiting_;  // by when they started waiting: the oldest first
  Ticket next_ticket_ = 0;
  uint64_t next_wait_ = 0;
  uint32_t refusals_ = 0;
};

}  // namespace gradgate::http
