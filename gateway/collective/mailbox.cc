#include "gateway/collective/mailbox.h"

#include <algorithm>
#include <string>
#include <utility>

namespace gradgate::gateway {
namespace {

// Bounds on what peers' abort messages may hold here: operations on file, bytes of a reason.
constexpr size_t kMaxAborts = 4096;
constexpr size_t kMaxAbortReasonBytes = 1024;
// What one filed message costs beyond its bytes (map node, vector), counted against the cap so
// that a flood of tiny messages is bounded too.
constexpr size_t kEntryOverheadBytes = 128;
// Expired messages are looked for at most this often (a scan of everything filed).
constexpr auto kExpiryInterval = std::chrono::milliseconds(100);

std::string describe(const MailKey& key) {
  return std::string(message_kind_name(key.kind)) + " message (tensor " +
         std::to_string(key.tensor_id) + ", seq " + std::to_string(key.seq) + ", phase " +
         std::to_string(key.phase) + ", chunk " + std::to_string(key.chunk) + ") from gateway " +
         std::to_string(key.from);
}

}  // namespace

Mailbox::Mailbox(uint32_t nodes, const Transport& peers, uint64_t cap_bytes,
                 std::chrono::milliseconds max_age)
    : cap_bytes_(cap_bytes), max_age_(max_age), nodes_(nodes), peers_(peers) {}

Status Mailbox::deliver(uint32_t from, MessageBytes&& message) {
  auto envelope = parse_envelope(message);
  std::lock_guard lock(mutex_);
  if (!envelope.ok() || from >= nodes_) {
    ++stats_.refused;
    return envelope.ok() ? Status(ErrorCode::kMalformedFrame, "sender rank out of range")
                         : envelope.status();
  }
  const auto finished = finished_up_to_.find(envelope->tensor_id);
  if (finished != finished_up_to_.end() && envelope->seq < finished->second) {
    ++stats_.late;
    return {};
  }
  const auto now = Clock::now();
  if (envelope->kind == MessageKind::kAbort) {
    drop_expired_locked(now);
    if (aborts_.size() >= kMaxAborts) {
      ++stats_.refused;
      return Status(ErrorCode::kResourceExhausted, "too many aborted operations on file");
    }
    const auto payload = std::span<const std::byte>(message).subspan(kEnvelopeBytes);
    const size_t shown = std::min(payload.size(), kMaxAbortReasonBytes);
    const bool skip = envelope->phase == static_cast<uint32_t>(ErrorCode::kNonFiniteGradient);
    Abort abort{"gateway " + std::to_string(from) + " aborted the all-reduce: " +
                    std::string(reinterpret_cast<const char*>(payload.data()), shown),
                skip ? ErrorCode::kNonFiniteGradient : ErrorCode::kAborted, now};
    auto [filed, inserted] = aborts_.try_emplace({envelope->tensor_id, envelope->seq}, abort);
    // A failure elsewhere wins over a skip: then every gateway fails the step.
    if (!inserted && filed->second.code == ErrorCode::kNonFiniteGradient && !skip) {
      filed->second = std::move(abort);
    }
    note_policy_locked(*envelope);
    changed_.notify_all();
    return {};
  }
  drop_expired_locked(now);
  const MailKey key{envelope->tensor_id, envelope->seq,   envelope->kind,
                    envelope->phase,     envelope->chunk, from};
  if (stats_.stored_bytes + message.size() + kEntryOverheadBytes > cap_bytes_) {
    ++stats_.refused;
    Status refused(ErrorCode::kResourceExhausted,
                   "the mailbox holds " + std::to_string(stats_.stored_bytes) + " bytes; the " +
                       describe(key) + " of " + std::to_string(message.size()) +
                       " bytes would pass its cap of " + std::to_string(cap_bytes_) +
                       " (transport.send_queue_bytes x (nodes - 1)): raise "
                       "transport.send_queue_bytes");
    // Its operation cannot complete here: it fails (take() returns why) and this gateway's
    // abort tells the others at once. The connection and the other operations go on.
    if (aborts_.size() < kMaxAborts) {
      aborts_.try_emplace({envelope->tensor_id, envelope->seq},
                          Abort{refused.message(), ErrorCode::kResourceExhausted, now, false});
      changed_.notify_all();
    }
    return refused;
  }
  const size_t bytes = message.size() + kEntryOverheadBytes;
  auto [it, inserted] = filed_.try_emplace(key, Stored{Mail{std::move(message), *envelope}, now});
  if (!inserted) {
    ++stats_.refused;
    return Status(ErrorCode::kMalformedFrame, "duplicate " + describe(key));
  }
  stats_.stored_bytes += bytes;
  ++stats_.delivered;
  note_policy_locked(*envelope);
  changed_.notify_all();
  return {};
}

void Mailbox::peer_changed() {
  // Under the lock: a wait that has just found the peer unchanged is then waiting, not missing it.
  std::lock_guard lock(mutex_);
  changed_.notify_all();
}

uint64_t Mailbox::down_count(uint32_t rank) const { return peers_.peer_down_count(rank); }

const Mailbox::Stored* Mailbox::other_policy_locked(const MailKey& key,
                                                    const SwitchStamp& stamp) const {
  for (auto it = filed_.lower_bound({key.tensor_id, key.seq, MessageKind{}, 0, 0, 0});
       it != filed_.end() && it->first.tensor_id == key.tensor_id && it->first.seq == key.seq;
       ++it) {
    if (it->first.from == key.from && !it->second.mail.envelope.stamp.runs_alike(stamp)) {
      return &it->second;
    }
  }
  return nullptr;
}

Result<Mail> Mailbox::take(const MailKey& key, Clock::time_point deadline,
                           uint64_t sender_down_count, const SwitchStamp& stamp) {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (auto over = operation_ended_locked(key.tensor_id, key.seq)) return *over;
    if (const Stored* other = other_policy_locked(key, stamp)) {
      return Status(
          ErrorCode::kIncompatible,
          "gateway " + std::to_string(key.from) + " runs step " + std::to_string(key.seq) +
              " of tensor " + std::to_string(key.tensor_id) + " under policy version " +
              std::to_string(other->mail.envelope.stamp.version) +
              ", this gateway under policy version " + std::to_string(stamp.version) +
              " (the gateways switched policy at different steps; the one behind catches up "
              "with the newer version)");
    }
    if (auto it = filed_.find(key); it != filed_.end()) {
      Mail mail = std::move(it->second.mail);
      stats_.stored_bytes -= mail.bytes.size() + kEntryOverheadBytes;
      filed_.erase(it);
      return mail;
    }
    if (peers_.peer_down_count(key.from) != sender_down_count) {
      return Status(ErrorCode::kUnavailable, "gateway " + std::to_string(key.from) +
                                                 " disconnected while waiting for its " +
                                                 describe(key));
    }
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout &&
        Clock::now() >= deadline) {
      return Status(ErrorCode::kTimeout, "timed out waiting for the " + describe(key));
    }
  }
}

Status Mailbox::wait_peer_up(uint32_t rank, Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  const bool done =
      changed_.wait_until(lock, deadline, [&] { return shut_down_ || peers_.peer_up(rank); });
  if (shut_down_) return Status(ErrorCode::kAborted, "the gateway is shutting down");
  if (!done) {
    return Status(ErrorCode::kTimeout,
                  "gateway " + std::to_string(rank) + " is not connected (timed out waiting)");
  }
  return {};
}

std::optional<Status> Mailbox::operation_ended_locked(uint32_t tensor_id, uint64_t seq) const {
  if (shut_down_) return Status(ErrorCode::kAborted, "the gateway is shutting down");
  if (auto abort = aborts_.find({tensor_id, seq}); abort != aborts_.end()) {
    return status_of(abort->second);
  }
  return std::nullopt;
}

Status Mailbox::wait_to_send(uint32_t rank, uint32_t tensor_id, uint64_t seq, uint64_t down_count,
                             Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  std::optional<Status> ended;
  changed_.wait_until(lock, deadline, [&] {
    if (auto over = operation_ended_locked(tensor_id, seq)) {
      ended = std::move(over);
    } else if (peers_.peer_down_count(rank) != down_count) {
      ended = Status(ErrorCode::kUnavailable,
                     "gateway " + std::to_string(rank) + " disconnected during the step");
    } else if (peers_.peer_up(rank)) {
      ended = Status();
    }
    return ended.has_value();
  });
  if (ended) return *ended;
  return Status(ErrorCode::kTimeout,
                "gateway " + std::to_string(rank) + " is not connected (timed out waiting)");
}

void Mailbox::finish(uint32_t tensor_id, uint64_t seq) {
  std::lock_guard lock(mutex_);
  auto& up_to = finished_up_to_[tensor_id];
  if (seq + 1 > up_to) up_to = seq + 1;
  for (auto it = filed_.lower_bound(MailKey{tensor_id, 0, {}, 0, 0, 0});
       it != filed_.end() && it->first.tensor_id == tensor_id && it->first.seq <= seq;) {
    erase_locked(it++);
  }
  for (auto it = aborts_.lower_bound({tensor_id, 0});
       it != aborts_.end() && it->first.tensor_id == tensor_id && it->first.seq <= seq;) {
    it = aborts_.erase(it);
  }
}

void Mailbox::note_policy_locked(const Envelope& envelope) {
  if (!finished_up_to_.contains(envelope.tensor_id)) return;  // bounded by this gateway's tensors
  peer_versions_.note(envelope.tensor_id, envelope.stamp);
}

uint32_t Mailbox::newest_peer_policy(uint32_t tensor_id) const {
  std::lock_guard lock(mutex_);
  return peer_versions_.newest(tensor_id);
}

Status Mailbox::status_of(const Abort& abort) { return Status(abort.code, abort.reason); }

std::optional<Status> Mailbox::peer_abort(uint32_t tensor_id, uint64_t seq) const {
  std::lock_guard lock(mutex_);
  const auto abort = aborts_.find({tensor_id, seq});
  if (abort == aborts_.end() || !abort->second.from_peer) return std::nullopt;
  return status_of(abort->second);
}

void Mailbox::forget_tensor(uint32_t tensor_id) {
  std::lock_guard lock(mutex_);
  finished_up_to_.erase(tensor_id);
  peer_versions_.forget(tensor_id);
  for (auto it = filed_.lower_bound(MailKey{tensor_id, 0, {}, 0, 0, 0});
       it != filed_.end() && it->first.tensor_id == tensor_id;) {
    erase_locked(it++);
  }
  for (auto it = aborts_.lower_bound({tensor_id, 0});
       it != aborts_.end() && it->first.tensor_id == tensor_id;) {
    it = aborts_.erase(it);
  }
}

void Mailbox::shutdown() {
  std::lock_guard lock(mutex_);
  shut_down_ = true;
  changed_.notify_all();
}

MailboxStats Mailbox::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Mailbox::drop_expired_locked(Clock::time_point now) {
  if (now - last_expiry_ < kExpiryInterval) return;
  last_expiry_ = now;
  std::erase_if(aborts_, [&](const auto& entry) { return now - entry.second.arrived > max_age_; });
  for (auto it = filed_.begin(); it != filed_.end();) {
    if (now - it->second.arrived > max_age_) {
      ++stats_.late;
      erase_locked(it++);
    } else {
      ++it;
    }
  }
}

void Mailbox::erase_locked(std::map<MailKey, Stored>::iterator it) {
  stats_.stored_bytes -= it->second.mail.bytes.size() + kEntryOverheadBytes;
  filed_.erase(it);
}

}  // namespace gradgate::gateway
