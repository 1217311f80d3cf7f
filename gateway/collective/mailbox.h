// Where messages from other gateways wait for the collective operation that needs them.
//
// The transport delivers messages on its own thread, possibly before this gateway has started the
// operation they belong to (a faster peer). The mailbox files each under its full key — tensor,
// sequence number, kind, phase, chunk and sender — and an operation's thread takes exactly the
// message it needs next, waiting until a deadline. A wait ends early with an error when the sender
// disconnects, when any peer aborts the operation, or at shutdown, so that no worker ever hangs.
// Whether a peer is connected, and how often it went down, only the transport knows: the mailbox
// asks it, and its waits are woken by peer_changed() when the transport reports a change.
// Memory is bounded: beyond `cap_bytes` a delivery is refused and its operation fails here (the
// connection stays), and messages of operations already finished are dropped on arrival.
#pragma once

#include <chrono>
#include <compare>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gateway/agreement/peer_versions.h"
#include "gateway/collective/envelope.h"
#include "gateway/transport/transport.h"
#include "gradgate/base/status.h"

namespace gradgate::gateway {

using Clock = std::chrono::steady_clock;

struct MailKey {
  uint32_t tensor_id = 0;
  uint64_t seq = 0;
  MessageKind kind = MessageKind::kGather;
  uint32_t phase = 0;
  uint16_t chunk = 0;
  uint32_t from = 0;
  auto operator<=>(const MailKey&) const = default;
};

/// One message; payload() is what follows the envelope. A received one carries its envelope as
/// parsed on delivery.
struct Mail {
  MessageBytes bytes;
  Envelope envelope{};
  std::span<const std::byte> payload() const {
    return std::span<const std::byte>(bytes).subspan(kEnvelopeBytes);
  }
};

struct MailboxStats {
  uint64_t delivered = 0;
  uint64_t late = 0;          // for operations already finished: dropped
  uint64_t refused = 0;       // malformed or over the memory cap
  uint64_t stored_bytes = 0;  // gauge: message bytes and a fixed overhead per message
};

class Mailbox {
 public:
  /// Of a job of `nodes` gateways whose liveness `peers` keeps; `peers` must outlive it.
  Mailbox(uint32_t nodes, const Transport& peers, uint64_t cap_bytes,
          std::chrono::milliseconds max_age);

  /// Files a message from `from` (transport thread). kMalformedFrame for a bad envelope (the
  /// transport resets the connection); kResourceExhausted over the memory cap, and then the
  /// message's operation fails with that reason when it takes a message (or at once, if waiting).
  Status deliver(uint32_t from, MessageBytes&& message);
  /// The transport reported a peer going up or down (on_peer): the waits look again, and those
  /// on a lost peer end with kUnavailable.
  void peer_changed();
  /// How many times `rank` went down so far (the transport's count); an operation snapshots it
  /// when it starts.
  uint64_t down_count(uint32_t rank) const;

  /// Takes the message filed under `key`, waiting until `deadline`. Errors: kTimeout, kAborted (a
  /// peer aborted the operation, or shutdown), kNonFiniteGradient (a peer aborted it because its
  /// node's gradient held NaN or infinite values), kUnavailable (the sender went down after
  /// `sender_down_count` was read), kIncompatible (a message of the same operation from the same
  /// sender's stamp does not run alike with `stamp`: it switched codecs at another step, and its
  /// messages will never match ours).
  Result<Mail> take(const MailKey& key, Clock::time_point deadline, uint64_t sender_down_count,
                    const SwitchStamp& stamp);
  /// The newest policy version a peer ran an operation of the tensor under, as the stamps of
  /// the messages filed since the tensor's first finished operation say (0: none seen;
  /// peer_versions.h).
  uint32_t newest_peer_policy(uint32_t tensor_id) const;
  /// What take() answers for the operation (tensor, seq) if a peer's abort of it is on file
  /// (kAborted or kNonFiniteGradient with the peer's reason); nothing otherwise (nor for a
  /// message over the cap, which only this gateway knows of). Of several aborts the first is
  /// kept, unless it is a skip (non-finite) and a later one a failure.
  std::optional<Status> peer_abort(uint32_t tensor_id, uint64_t seq) const;
  /// Waits until `rank` is connected (kTimeout, kAborted at shutdown).
  Status wait_peer_up(uint32_t rank, Clock::time_point deadline);
  /// Before the operation (tensor, seq) sends to `rank`: waits until `rank` is connected, and
  /// ends the wait as take() would when a peer aborted the operation or `rank` went down after
  /// `down_count` was read (kUnavailable), instead of waiting out the deadline for a lost peer.
  Status wait_to_send(uint32_t rank, uint32_t tensor_id, uint64_t seq, uint64_t down_count,
                      Clock::time_point deadline);

  /// The operation (tensor, seq) is over: drops what is filed for it and earlier sequence numbers,
  /// and drops later arrivals for them.
  void finish(uint32_t tensor_id, uint64_t seq);
  /// The tensor is gone (its workers left): drops everything of it and its sequence history.
  void forget_tensor(uint32_t tensor_id);
  /// Ends every wait with kAborted, now and later.
  void shutdown();

  MailboxStats stats() const;

 private:
  struct Stored {
    Mail mail;
    Clock::time_point arrived;
  };
  /// The first message of `key`'s operation from `key.from` whose stamp does not run alike.
  const Stored* other_policy_locked(const MailKey& key, const SwitchStamp& stamp) const;
  struct OpId {
    uint32_t tensor_id;
    uint64_t seq;
    auto operator<=>(const OpId&) const = default;
  };
  void drop_expired_locked(Clock::time_point now);
  /// Notes the stamp of an accepted message for newest_peer_policy().
  void note_policy_locked(const Envelope& envelope);
  void erase_locked(std::map<MailKey, Stored>::iterator it);

  const uint64_t cap_bytes_;
  const std::chrono::milliseconds max_age_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<MailKey, Stored> filed_;
  struct Abort {
    std::string reason;
    ErrorCode code;  // kAborted, or kNonFiniteGradient: the step is skipped, not failed; or
                     // kResourceExhausted for a message over the cap (this gateway's own)
    Clock::time_point arrived;
    bool from_peer = true;  // false: this gateway's own, which its peers have not heard of
  };
  /// What take() answers for an operation a peer aborted.
  static Status status_of(const Abort& abort);
  /// Why the operation (tensor, seq) cannot go on whatever arrives: shutdown, or a peer's abort
  /// of it (caller holds mutex_).
  std::optional<Status> operation_ended_locked(uint32_t tensor_id, uint64_t seq) const;
  std::map<OpId, Abort> aborts_;                 // by operation
  std::map<uint32_t, uint64_t> finished_up_to_;  // per tensor: highest finished seq + 1
  PeerVersions peer_versions_;                   // of tensors with a finished operation
  const uint32_t nodes_;
  const Transport& peers_;
  bool shut_down_ = false;
  Clock::time_point last_expiry_{};
  MailboxStats stats_;
};

}  // namespace gradgate::gateway
