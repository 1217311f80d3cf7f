// An in-memory datagram network for the tests of the reliability layer (gateway/transport/
// reliable), on a simulated clock: a LossyLink carries datagrams one way and drops, duplicates
// and reorders them (a held-back datagram arrives after `reorder_depth` later ones, or after
// `max_hold`) as told, with a seeded PRNG so that every run is the same. A SessionPair joins
// two Sessions with a link each way and moves the clock from one event to the next: no sleeps,
// no real time, every loop bounded by a step count.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "gateway/transport/reliable/session.h"

namespace gradgate::gateway::reliable::testing {

using Datagram = std::vector<std::byte>;
using std::chrono::microseconds;
using std::chrono::milliseconds;

/// SplitMix64: small, and the same sequence on every platform.
class Prng {
 public:
  explicit Prng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// In [0, bound).
  uint64_t below(uint64_t bound) { return next() % bound; }
  bool chance(double probability) {
    return static_cast<double>(next() >> 11) * 0x1.0p-53 < probability;
  }

 private:
  uint64_t state_;
};

struct Impairments {
  double drop = 0.0;
  double duplicate = 0.0;
  double reorder = 0.0;
  uint32_t reorder_depth = 2;  // below the 3 SACKed packets that make a loss
  Clock::duration latency = microseconds(20);
  Clock::duration max_hold = microseconds(100);
};

struct LinkCounters {
  uint64_t sent = 0;
  uint64_t dropped = 0;
  uint64_t duplicated = 0;
  uint64_t reordered = 0;
};

/// One direction of a link.
class LossyLink {
 public:
  LossyLink(Impairments impairments, uint64_t seed) : impairments_(impairments), prng_(seed) {}

  void set_impairments(Impairments impairments) { impairments_ = impairments; }

  void send(const Datagram& datagram, Clock::time_point now) {
    ++counters_.sent;
    if (prng_.chance(impairments_.drop)) {
      ++counters_.dropped;
      return;
    }
    const int copies = prng_.chance(impairments_.duplicate) ? 2 : 1;
    counters_.duplicated += copies - 1;
    for (int copy = 0; copy < copies; ++copy) {
      if (prng_.chance(impairments_.reorder)) {
        ++counters_.reordered;
        held_.push_back({datagram, impairments_.reorder_depth, now + impairments_.max_hold});
        continue;
      }
      in_transit(datagram, now + impairments_.latency);
      pass_held(now);
    }
  }

  /// The datagrams that have arrived by `now`, in arrival order.
  std::vector<Datagram> arrivals(Clock::time_point now) {
    for (auto held = held_.begin(); held != held_.end();) {
      if (held->until > now) {
        ++held;
        continue;
      }
      in_transit(std::move(held->datagram), held->until);
      held = held_.erase(held);
    }
    std::vector<Datagram> arrived;
    while (!transit_.empty() && transit_.begin()->first.first <= now) {
      arrived.push_back(std::move(transit_.begin()->second));
      transit_.erase(transit_.begin());
    }
    return arrived;
  }

  std::optional<Clock::time_point> next_arrival() const {
    std::optional<Clock::time_point> next;
    if (!transit_.empty()) next = transit_.begin()->first.first;
    for (const Held& held : held_) next = std::min(next.value_or(held.until), held.until);
    return next;
  }

  const LinkCounters& counters() const { return counters_; }

 private:
  struct Held {
    Datagram datagram;
    uint32_t passes_left;
    Clock::time_point until;
  };

  void in_transit(Datagram datagram, Clock::time_point arrival) {
    transit_.emplace(std::make_pair(arrival, order_++), std::move(datagram));
  }

  /// One datagram went past the held ones: those passed often enough go on behind it.
  void pass_held(Clock::time_point now) {
    for (auto held = held_.begin(); held != held_.end();) {
      if (--held->passes_left > 0) {
        ++held;
        continue;
      }
      in_transit(std::move(held->datagram), now + impairments_.latency);
      held = held_.erase(held);
    }
  }

  Impairments impairments_;
  Prng prng_;
  std::map<std::pair<Clock::time_point, uint64_t>, Datagram> transit_;
  std::vector<Held> held_;
  uint64_t order_ = 0;
  LinkCounters counters_;
};

/// A configuration for simulated links with tens of microseconds of latency.
inline Config fast_link_config() {
  Config config;
  config.initial_rto = milliseconds(10);
  config.min_rto = milliseconds(2);
  config.max_rto = milliseconds(200);
  config.ack_delay = microseconds(50);
  config.max_message_bytes = 4u << 20;
  config.max_queued_bytes = 16u << 20;
  return config;
}

/// One side of a SessionPair: its session and what it received.
struct Side {
  explicit Side(Session with) : session(std::move(with)) {}

  Session session;
  std::vector<ReceivedMessage> received;
  std::vector<Status> errors;  // from on_datagram
  bool takes_messages = true;
};

/// Ranks 0 (a) and 1 (b) of job 7, joined by a link each way.
class SessionPair {
 public:
  static constexpr uint64_t kJob = 7;

  SessionPair(const Config& config, Impairments a_to_b, Impairments b_to_a, uint64_t seed)
      : a{Session(config, {kJob, 0, 1, 0xA1})},
        b{Session(config, {kJob, 1, 0, 0xB1})},
        a_to_b_(a_to_b, seed),
        b_to_a_(b_to_a, seed + 1) {}

  /// Every side transmits what it has, then takes what has arrived by now.
  void step() {
    transmit(a, a_to_b_);
    transmit(b, b_to_a_);
    receive(b_to_a_, a);
    receive(a_to_b_, b);
  }

  /// Moves the clock to the next event; false when nothing is left to happen.
  bool advance() {
    std::optional<Clock::time_point> next;
    for (const auto& event : {a.session.next_timer(), b.session.next_timer(),
                              a_to_b_.next_arrival(), b_to_a_.next_arrival()}) {
      if (event) next = std::min(next.value_or(*event), *event);
    }
    if (!next) return false;
    now = std::max(now, *next);
    return true;
  }

  /// Steps until `done()` holds, nothing is left to happen or `max_steps` pass; returns done().
  template <typename Predicate>
  bool run_until(Predicate done, int max_steps) {
    for (int steps = 0; steps < max_steps && !done(); ++steps) {
      step();
      if (!advance()) break;
    }
    return done();
  }

  /// Steps until simulated time reaches `until` (or nothing is left to happen).
  void run_for(Clock::duration duration, int max_steps) {
    const Clock::time_point until = now + duration;
    run_until([&] { return now >= until; }, max_steps);
  }

  /// A side that takes nothing only reads datagrams; call this to take its messages now.
  static void take_all(Side& side) {
    while (auto message = side.session.take_message()) side.received.push_back(std::move(*message));
  }

  LossyLink& a_to_b() { return a_to_b_; }
  LossyLink& b_to_a() { return b_to_a_; }

  Clock::time_point now = Clock::time_point{} + std::chrono::hours(1);
  Side a;
  Side b;

 private:
  void transmit(Side& side, LossyLink& link) {
    for (const OutgoingData& data : side.session.poll(now)) {
      Datagram datagram(data_packet_bytes(data.length));
      record(side, side.session.encode(data, datagram), datagram, link);
    }
    if (const auto ack = side.session.take_ack(now)) {
      Datagram datagram(ack_packet_bytes(ack->sack_count));
      record(side, side.session.encode(*ack, datagram), datagram, link);
    }
  }

  void record(Side& side, const Result<std::size_t>& encoded, const Datagram& datagram,
              LossyLink& link) {
    if (encoded.ok()) {
      link.send(datagram, now);
    } else {
      side.errors.push_back(encoded.status());
    }
  }

  void receive(LossyLink& link, Side& side) {
    for (const Datagram& datagram : link.arrivals(now)) {
      Status status = side.session.on_datagram(datagram, now);
      if (!status.ok()) side.errors.push_back(status);
    }
    if (side.takes_messages) take_all(side);
  }

  LossyLink a_to_b_;
  LossyLink b_to_a_;
};

}  // namespace gradgate::gateway::reliable::testing
