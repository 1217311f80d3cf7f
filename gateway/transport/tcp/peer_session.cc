#include "gateway/transport/tcp/peer_session.h"

#include <string>
#include <utility>

namespace gradgate::gateway::tcp {

Status PeerSession::append(Message message) {
  const uint64_t framed = kLengthPrefixBytes + message->size();
  std::lock_guard lock(mutex_);
  if (!open_) return Status(ErrorCode::kUnavailable, "peer " + std::to_string(rank_) + " is down");
  if (held_bytes_ + framed > cap_bytes_) {
    return Status(ErrorCode::kResourceExhausted,
                  "send queue of peer " + std::to_string(rank_) + " holds " +
                      std::to_string(held_bytes_) + " bytes; " + std::to_string(framed) +
                      " more would exceed the cap of " + std::to_string(cap_bytes_));
  }
  held_.push_back({std::move(message), framed});
  held_bytes_ += framed;
  ++next_seq_;
  return {};
}

bool PeerSession::open() const {
  std::lock_guard lock(mutex_);
  return open_;
}

uint64_t PeerSession::held_bytes() const {
  std::lock_guard lock(mutex_);
  return held_bytes_;
}

uint64_t PeerSession::first_held() const {
  std::lock_guard lock(mutex_);
  return first_held_;
}

Message PeerSession::message(uint64_t seq) const {
  std::lock_guard lock(mutex_);
  if (seq < first_held_ || seq >= next_seq_) return nullptr;
  return held_[seq - first_held_].message;
}

Status PeerSession::acknowledge(uint64_t delivered) {
  std::lock_guard lock(mutex_);
  if (delivered < first_held_ || delivered > next_seq_ || delivered > written_up_to_) {
    return Status(ErrorCode::kMalformedFrame,
                  "peer " + std::to_string(rank_) + " acknowledged " + std::to_string(delivered) +
                      " messages; " + std::to_string(first_held_) + " were acknowledged and " +
                      std::to_string(written_up_to_) + " written");
  }
  for (; first_held_ < delivered; ++first_held_) {
    held_bytes_ -= held_.front().framed_bytes;
    held_.pop_front();
  }
  return {};
}

bool PeerSession::note_written(uint64_t seq) {
  if (seq < written_up_to_) return true;
  written_up_to_ = seq + 1;
  return false;
}

bool PeerSession::can_resume(const Hello& theirs, uint64_t own_incarnation) const {
  std::lock_guard lock(mutex_);
  return open_ && peer_incarnation_ != 0 && theirs.incarnation == peer_incarnation_ &&
         theirs.peer_incarnation == own_incarnation && id_ != 0 && theirs.session_id == id_ &&
         theirs.received >= first_held_ && theirs.received <= written_up_to_;
}

uint64_t PeerSession::resume(uint64_t delivered) {
  // can_resume() checked the bounds; acknowledging cannot fail.
  (void)acknowledge(delivered);
  return delivered;
}

void PeerSession::restart(uint64_t peer_incarnation, uint64_t id) {
  std::lock_guard lock(mutex_);
  drop_locked();
  open_ = true;
  peer_incarnation_ = peer_incarnation;
  id_ = id;
}

void PeerSession::close() {
  std::lock_guard lock(mutex_);
  drop_locked();
  open_ = false;
  peer_incarnation_ = 0;
  id_ = 0;
}

void PeerSession::drop_locked() {
  held_.clear();
  held_bytes_ = 0;
  first_held_ = next_seq_ = written_up_to_ = delivered_ = 0;
}

}  // namespace gradgate::gateway::tcp
