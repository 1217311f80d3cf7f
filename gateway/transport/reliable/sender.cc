#include "gateway/transport/reliable/sender.h"

#include <algorithm>
#include <string>
#include <utility>

namespace gradgate::gateway::reliable {
namespace {

/// SACKed packets above an unacknowledged one that make it lost (RFC 6675's DupThresh).
constexpr uint32_t kLossThreshold = 3;

}  // namespace

PeerSender::PeerSender(const Config& config, uint32_t peer_rank)
    : config_(config),
      peer_rank_(peer_rank),
      rtt_(config),
      peer_window_(config.receive_window_packets) {}

Result<uint64_t> PeerSender::enqueue(Message message, Clock::time_point now) {
  if (failure_) {
    return Status(ErrorCode::kUnavailable,
                  "rank " + std::to_string(peer_rank_) + " is lost: " + failure_->status.message());
  }
  const std::size_t size = message ? message->size() : 0;
  if (size == 0 || size > config_.max_message_bytes) {
    return Status(ErrorCode::kInvalidArgument, "message of " + std::to_string(size) +
                                                   " bytes, outside [1, " +
                                                   std::to_string(config_.max_message_bytes) + "]");
  }
  if (queued_bytes_ + size > config_.max_queued_bytes) {
    return Status(ErrorCode::kResourceExhausted,
                  "send queue to rank " + std::to_string(peer_rank_) + " holds " +
                      std::to_string(queued_bytes_) + " bytes; " + std::to_string(size) +
                      " more would pass the cap of " + std::to_string(config_.max_queued_bytes));
  }
  const auto fragments = static_cast<uint32_t>((size - 1) / config_.payload_bytes + 1);
  const uint64_t id = next_message_id_++;
  messages_.push_back(
      {id, std::move(message), next_sequence_, fragments, now + config_.message_deadline});
  next_sequence_ += fragments;
  queued_bytes_ += size;
  return id;
}

std::vector<OutgoingData> PeerSender::poll(Clock::time_point now) {
  std::vector<OutgoingData> out;
  if (failure_) return out;
  if (!messages_.empty() && now >= messages_.front().deadline) {
    fail_front_message();
    return out;
  }
  retransmit_expired(now, out);
  retransmit_lost(now, out);
  send_new(now, out);
  return out;
}

Status PeerSender::on_ack(const AckFields& ack, Clock::time_point now) {
  const uint64_t highest = ack.sack_count > 0 ? ack.ranges().back().end : ack.cumulative;
  if (highest > next_send_) {
    return Status(ErrorCode::kMalformedFrame, "rank " + std::to_string(peer_rank_) +
                                                  " acknowledges sequence " +
                                                  std::to_string(highest - 1) + ", only " +
                                                  std::to_string(next_send_) + " sent");
  }
  ++counters_.acks_received;
  if (failure_ || ack.cumulative < cumulative_) return {};
  std::optional<Clock::time_point> sampled_send;
  const auto acknowledge = [&](SentPacket& packet) {
    if (packet.acknowledged) return;
    packet.acknowledged = true;
    --in_flight_;
    if (packet.lost) --lost_;
    packet.lost = false;
    if (packet.transmissions == 1 && (!sampled_send || packet.last_sent > *sampled_send)) {
      sampled_send = packet.last_sent;
    }
  };
  for (; cumulative_ < ack.cumulative; ++cumulative_) {
    acknowledge(sent_.front());
    sent_.pop_front();
  }
  peer_window_ = ack.window;
  for (const SackRange& range : ack.ranges()) {
    for (uint64_t sequence = range.begin; sequence < range.end; ++sequence) {
      acknowledge(sent_[sequence - cumulative_]);
    }
  }
  if (sampled_send) rtt_.add_sample(now - *sampled_send);
  if (ack.sack_count > 0) mark_lost();
  release_acknowledged_messages();
  if (sent_.empty()) outstanding_since_.reset();
  return {};
}

std::optional<Clock::time_point> PeerSender::next_timer() const {
  if (failure_) return std::nullopt;
  if (lost_ > 0 || can_send_new()) return Clock::time_point::min();
  std::optional<Clock::time_point> next;
  if (!messages_.empty()) next = messages_.front().deadline;
  if (in_flight_ > 0) {
    next = std::min(next.value_or(Clock::time_point::max()), earliest_sent_ + rtt_.rto());
  }
  return next;
}

SenderCounters PeerSender::counters() const {
  SenderCounters counters = counters_;
  counters.in_flight = in_flight_;
  counters.queued_bytes = queued_bytes_;
  return counters;
}

bool PeerSender::can_send_new() const {
  if (next_send_ == next_sequence_ || in_flight_ >= config_.window_packets) return false;
  const bool window_open = next_send_ < cumulative_ + peer_window_;
  const bool window_probe = sent_.empty();
  return window_open || window_probe;
}

void PeerSender::send_new(Clock::time_point now, std::vector<OutgoingData>& out) {
  while (can_send_new()) {
    const PendingMessage& message = messages_[send_message_id_ - messages_.front().id];
    const DataFields fields{next_send_, message.id, send_fragment_, message.fragments};
    if (++send_fragment_ == message.fragments) {
      ++send_message_id_;
      send_fragment_ = 0;
    }
    if (in_flight_ == 0) earliest_sent_ = now;
    if (!outstanding_since_) outstanding_since_ = now;
    sent_.push_back({fields, now});
    ++in_flight_;
    ++next_send_;
    out.push_back(outgoing(fields));
  }
}

void PeerSender::retransmit_expired(Clock::time_point now, std::vector<OutgoingData>& out) {
  const Clock::duration rto = rtt_.rto();
  if (in_flight_ == 0 || now < earliest_sent_ + rto) return;
  bool expired = false;
  Clock::time_point earliest = now;
  for (SentPacket& packet : sent_) {
    if (packet.acknowledged) continue;
    if (now >= packet.last_sent + rto) {
      retransmit(packet, now, out);
      ++counters_.retransmits_timeout;
      expired = true;
    }
    earliest = std::min(earliest, packet.last_sent);
  }
  earliest_sent_ = earliest;
  if (expired) rtt_.back_off();
}

void PeerSender::retransmit_lost(Clock::time_point now, std::vector<OutgoingData>& out) {
  for (auto packet = sent_.begin(); lost_ > 0 && packet != sent_.end(); ++packet) {
    if (!packet->lost) continue;
    packet->fast_retransmitted = true;
    retransmit(*packet, now, out);
    ++counters_.retransmits_fast;
  }
}

void PeerSender::retransmit(SentPacket& packet, Clock::time_point now,
                            std::vector<OutgoingData>& out) {
  if (packet.lost) --lost_;
  packet.lost = false;
  packet.last_sent = now;
  ++packet.transmissions;
  out.push_back(outgoing(packet.fields));
}

OutgoingData PeerSender::outgoing(const DataFields& fields) {
  const PendingMessage& message = messages_[fields.message_id - messages_.front().id];
  const std::size_t offset = std::size_t{fields.fragment_index} * config_.payload_bytes;
  const std::size_t length =
      std::min<std::size_t>(config_.payload_bytes, message.bytes->size() - offset);
  ++counters_.packets_sent;
  counters_.bytes_sent += length;
  return {fields, message.bytes, offset, length};
}

void PeerSender::mark_lost() {
  uint32_t acknowledged_above = 0;
  for (auto packet = sent_.rbegin(); packet != sent_.rend(); ++packet) {
    if (packet->acknowledged) {
      ++acknowledged_above;
    } else if (acknowledged_above >= kLossThreshold && !packet->lost &&
               !packet->fast_retransmitted) {
      packet->lost = true;
      ++lost_;
    }
  }
}

void PeerSender::release_acknowledged_messages() {
  while (!messages_.empty() &&
         messages_.front().first_sequence + messages_.front().fragments <= cumulative_) {
    queued_bytes_ -= messages_.front().bytes->size();
    ++counters_.messages_acknowledged;
    messages_.pop_front();
  }
}

void PeerSender::fail_front_message() {
  const PendingMessage& message = messages_.front();
  const auto deadline_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(config_.message_deadline).count();
  failure_ = SendFailure{
      message.id,
      Status(ErrorCode::kTimeout,
             "message " + std::to_string(message.id) + " (" +
                 std::to_string(message.bytes->size()) + " bytes) not acknowledged within " +
                 std::to_string(deadline_ms) + " ms by rank " + std::to_string(peer_rank_))};
  messages_.clear();
  sent_.clear();
  in_flight_ = 0;
  lost_ = 0;
  queued_bytes_ = 0;
  outstanding_since_.reset();
}

}  // namespace gradgate::gateway::reliable
