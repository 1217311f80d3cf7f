// The message stream between this gateway and one peer, which outlives the TCP connections that
// carry it (docs/transport.md#sessions). Every message sent to the peer gets the next sequence
// number and is held until the peer acknowledges it; when a connection breaks and a new one comes
// up between the same two transport instances (same incarnations) that both still hold the same
// session (its id, drawn by the accepting side when it started), the session resumes: the peer
// says how many messages it delivered, those are dropped, and the rest are written again in
// order. Its own side counts the peer's messages delivered here, so that nothing is delivered
// twice or lost. A peer that restarted (another incarnation) starts a fresh session: what was
// held for the old one is dropped and the layer above hears the peer go down first.
//
// Open from the first handshake until the session is lost (close()); while open, messages are
// accepted whether a connection is up or not. Memory is bounded: held messages count against
// `cap_bytes` (framed bytes).
//
// Threads: append(), open() and held_bytes() from any thread; the rest on the transport's thread.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>

#include "gateway/transport/tcp/wire.h"
#include "gateway/transport/transport.h"

namespace gradgate::gateway::tcp {

class PeerSession {
 public:
  PeerSession(uint32_t rank, uint64_t cap_bytes) : rank_(rank), cap_bytes_(cap_bytes) {}

  /// Holds `message` (non-empty) under the next sequence number. kUnavailable when the session
  /// is not open, kResourceExhausted when held bytes would pass the cap.
  Status append(Message message);
  bool open() const;
  /// Framed bytes held until acknowledged (written or not).
  uint64_t held_bytes() const;

  /// The message numbered `seq`, or null when none is held under it (not sent yet, or
  /// acknowledged). Transport thread, like everything below.
  Message message(uint64_t seq) const;
  /// The peer delivered `delivered` messages of this session in all: the ones below are dropped.
  /// kMalformedFrame when that is fewer than it acknowledged before or more than were sent.
  Status acknowledge(uint64_t delivered);
  /// Notes that message `seq` was handed to a connection; true when it had been written before
  /// (on an earlier connection): a resend.
  bool note_written(uint64_t seq);

  /// One message of the peer's was delivered here.
  void count_delivered() { ++delivered_; }
  uint64_t delivered() const { return delivered_; }
  uint64_t peer_incarnation() const { return peer_incarnation_; }
  /// The session's id (0 while closed).
  uint64_t id() const { return id_; }

  /// Whether a connection whose other side says `theirs` can carry this session on: the same
  /// two incarnations as before (`own_incarnation` is this transport's), the same session id,
  /// and a delivered count within what is held.
  bool can_resume(const Hello& theirs, uint64_t own_incarnation) const;
  /// Carries the session on over a new connection whose peer delivered `delivered` messages
  /// (can_resume() held): returns the sequence number to write from.
  uint64_t resume(uint64_t delivered);
  /// Opens the fresh session `id` (not 0) with the peer incarnation `peer_incarnation`: nothing
  /// held, nothing delivered yet.
  void restart(uint64_t peer_incarnation, uint64_t id);
  /// The session is lost: drops what is held, refuses appends, forgets the peer's incarnation.
  void close();
  /// The first sequence number still held (every lower one is acknowledged).
  uint64_t first_held() const;

 private:
  struct Held {
    Message message;
    uint64_t framed_bytes = 0;
  };
  void drop_locked();

  const uint32_t rank_;
  const uint64_t cap_bytes_;

  mutable std::mutex mutex_;  // guards the members up to next_seq_
  bool open_ = false;
  std::deque<Held> held_;    // sequence numbers first_held_ .. next_seq_ - 1
  uint64_t first_held_ = 0;  // = messages the peer acknowledged
  uint64_t next_seq_ = 0;
  uint64_t held_bytes_ = 0;

  // Transport thread only.
  uint64_t written_up_to_ = 0;  // one past the highest sequence number ever written
  uint64_t delivered_ = 0;
  uint64_t peer_incarnation_ = 0;
  uint64_t id_ = 0;
};

}  // namespace gradgate::gateway::tcp
