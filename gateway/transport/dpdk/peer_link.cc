#include "gateway/transport/dpdk/peer_link.h"

#include <utility>

namespace gradgate::gateway::dpdk {

PeerLink::PeerLink(const Options& options)
    : options_(options), epochs_(std::random_device{}()), address_(options.address) {
  std::lock_guard lock(mutex_);
  new_session_locked();
}

void PeerLink::new_session_locked() {
  uint64_t epoch = 0;
  while (epoch == 0) epoch = epochs_();
  session_ = std::make_unique<reliable::Session>(
      options_.config,
      reliable::SessionAddress{options_.job_id, options_.local_rank, options_.peer_rank, epoch});
  session_retransmits_ = 0;
  session_acknowledged_ = 0;
  receiving_since_.reset();
  next_hello_ = {};
}

Status PeerLink::send(Message message) {
  std::lock_guard lock(mutex_);
  if (!up_) {
    return Status(ErrorCode::kUnavailable,
                  "transport: rank " + std::to_string(options_.peer_rank) + " is not connected");
  }
  Result<uint64_t> queued = session_->send(std::move(message), Clock::now());
  return queued.ok() ? Status() : queued.status();
}

void PeerLink::on_datagram(std::span<const std::byte> datagram, const MacAddress& mac,
                           Clock::time_point now) {
  std::lock_guard lock(mutex_);
  const Status taken = session_->on_datagram(datagram, now);
  if (taken.code() == ErrorCode::kIncompatible) ++totals_.foreign;
  if (!taken.ok()) return;
  mac_ = mac;
  last_heard_ = now;
  const bool data = datagram.size() > 5 &&
                    datagram[5] == std::byte{static_cast<uint8_t>(reliable::PacketType::kData)};
  if (data && !receiving_since_) receiving_since_ = now;
}

LinkEvents PeerLink::service(Clock::time_point now, DatagramSink& sink) {
  LinkEvents events;
  std::lock_guard lock(mutex_);
  reliable::Session& session = *session_;
  if (session.take_peer_restarted() && up_) events.restarted = true;
  if (!up_ && session.peer_epoch() != 0 && session.status().ok()) {
    up_ = true;
    events.came_up = true;
    last_heard_ = now;
  }
  while (std::optional<reliable::ReceivedMessage> message = session.take_message()) {
    if (receiving_since_) meter_.add_transfer(message->bytes.size(), *receiving_since_, now);
    receiving_since_.reset();
    events.messages.push_back(std::move(message->bytes));
  }
  const auto timer = session.next_timer();
  if (timer && *timer <= now) {
    for (const reliable::OutgoingData& data : session.poll(now)) {
      std::span<std::byte> buffer = sink.begin_datagram();
      if (buffer.empty()) break;
      Result<std::size_t> bytes = session.encode(data, buffer);
      sink.end_datagram(bytes.ok() ? *bytes : 0);
    }
  }
  std::optional<reliable::AckFields> ack = session.take_ack(now);
  if (!ack && now >= next_hello_) {
    ack.emplace();
    ack->cumulative = session.receiver().cumulative();
    ack->window = session.receiver().window();
  }
  if (ack) {
    next_hello_ = now + options_.hello_interval;
    std::span<std::byte> buffer = sink.begin_datagram();
    if (!buffer.empty()) {
      Result<std::size_t> bytes = session.encode(*ack, buffer);
      sink.end_datagram(bytes.ok() ? *bytes : 0);
    }
  }
  add_totals_locked();
  if (!session.status().ok()) {
    lose_locked(session.status().message(), events);
  } else if (up_ && now - last_heard_ > options_.config.peer_timeout) {
    lose_locked("no packet from rank " + std::to_string(options_.peer_rank) + " for " +
                    std::to_string(options_.config.peer_timeout.count()) + " ms",
                events);
  }
  return events;
}

LinkEvents PeerLink::reset(const std::string& reason) {
  LinkEvents events;
  std::lock_guard lock(mutex_);
  lose_locked(reason, events);
  return events;
}

LinkEvents PeerLink::move_to(const UdpAddress& address) {
  LinkEvents events;
  std::lock_guard lock(mutex_);
  lose_locked("moved to another address", events);
  address_ = address;
  mac_ = kBroadcastMac;
  return events;
}

void PeerLink::lose_locked(const std::string& reason, LinkEvents& events) {
  if (up_) events.lost = reason;
  up_ = false;
  new_session_locked();
}

void PeerLink::add_totals_locked() {
  const reliable::SenderCounters sent = session_->sender().counters();
  const uint64_t retransmits = sent.retransmits_timeout + sent.retransmits_fast;
  totals_.retransmits += retransmits - session_retransmits_;
  totals_.messages_acknowledged += sent.messages_acknowledged - session_acknowledged_;
  totals_.queued_bytes = sent.queued_bytes;
  session_retransmits_ = retransmits;
  session_acknowledged_ = sent.messages_acknowledged;
  if (const auto smoothed = session_->sender().rtt().smoothed()) {
    rtt_seconds_ = std::chrono::duration<double>(*smoothed).count();
  }
}

LinkTotals PeerLink::totals() const {
  std::lock_guard lock(mutex_);
  return totals_;
}

LinkEstimate PeerLink::estimate(Clock::time_point now) const {
  LinkEstimate estimate = meter_.estimate(options_.peer_rank, now);
  estimate.rtt_seconds = rtt_seconds_.load();
  return estimate;
}

}  // namespace gradgate::gateway::dpdk
