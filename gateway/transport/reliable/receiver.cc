#include "gateway/transport/reliable/receiver.h"

#include <algorithm>
#include <utility>

namespace gradgate::gateway::reliable {

PeerReceiver::PeerReceiver(const Config& config, uint32_t peer_rank)
    : config_(config),
      peer_rank_(peer_rank),
      right_edge_(config.receive_window_packets),
      advertised_window_(config.receive_window_packets) {}

Status PeerReceiver::on_data(const DataFields& fields, std::span<const std::byte> payload,
                             Clock::time_point now) {
  if (!failure_.ok()) return failure_;
  ++counters_.packets_received;
  const uint64_t sequence = fields.sequence;
  if (sequence < expected_ || held_.contains(sequence)) {
    ++counters_.duplicates;
    ack_now_ = true;
    return {};
  }
  if (sequence >= right_edge_) {
    ++counters_.beyond_window;
    ack_now_ = true;
    return {};
  }
  if (sequence > expected_) {
    held_.emplace(sequence, HeldFragment{fields, {payload.begin(), payload.end()}});
    ++counters_.out_of_order;
    ack_now_ = true;
    return {};
  }
  const bool fills_gap = !held_.empty();
  GRADGATE_RETURN_IF_ERROR(append(fields, payload));
  ++expected_;
  while (!held_.empty() && held_.begin()->first == expected_) {
    const auto next = held_.extract(held_.begin());
    GRADGATE_RETURN_IF_ERROR(append(next.mapped().fields, next.mapped().payload));
    ++expected_;
  }
  advance_right_edge();
  if (fills_gap) {
    ack_now_ = true;
  } else {
    ++unacknowledged_;
    if (!first_unacknowledged_) first_unacknowledged_ = now;
  }
  return {};
}

std::optional<ReceivedMessage> PeerReceiver::take_message() {
  if (ready_.empty()) return std::nullopt;
  ReadyMessage ready = std::move(ready_.front());
  ready_.pop_front();
  ready_fragments_ -= ready.fragments;
  advance_right_edge();
  if (advertised_window_ == 0 && window() > 0) ack_now_ = true;
  return std::move(ready.message);
}

bool PeerReceiver::ack_due(Clock::time_point now) const {
  if (!failure_.ok()) return false;
  return ack_now_ || unacknowledged_ >= config_.ack_every_packets ||
         (first_unacknowledged_ && now >= *first_unacknowledged_ + config_.ack_delay);
}

std::optional<Clock::time_point> PeerReceiver::next_ack_time() const {
  if (!failure_.ok()) return std::nullopt;
  if (ack_now_ || unacknowledged_ >= config_.ack_every_packets) return Clock::time_point::min();
  if (first_unacknowledged_) return *first_unacknowledged_ + config_.ack_delay;
  return std::nullopt;
}

std::optional<AckFields> PeerReceiver::take_ack(Clock::time_point now) {
  if (!ack_due(now)) return std::nullopt;
  AckFields ack;
  ack.cumulative = expected_;
  ack.window = window();
  for (auto held = held_.begin(); held != held_.end() && ack.sack_count < kMaxSackRanges;) {
    SackRange range{held->first, held->first + 1};
    for (++held; held != held_.end() && held->first == range.end; ++held) ++range.end;
    ack.sacks[ack.sack_count++] = range;
  }
  ack_now_ = false;
  unacknowledged_ = 0;
  first_unacknowledged_.reset();
  advertised_window_ = ack.window;
  ++counters_.acks_sent;
  return ack;
}

Status PeerReceiver::append(const DataFields& fields, std::span<const std::byte> payload) {
  if (!assembly_) {
    GRADGATE_RETURN_IF_ERROR(start_message(fields, payload));
  } else if (fields.message_id != assembly_->message_id ||
             fields.fragment_index != assembly_->next_fragment ||
             fields.fragment_count != assembly_->fragments) {
    return protocol_error(
        "sequence " + std::to_string(fields.sequence) + " is fragment " +
        std::to_string(fields.fragment_index) + "/" + std::to_string(fields.fragment_count) +
        " of message " + std::to_string(fields.message_id) + ", expected fragment " +
        std::to_string(assembly_->next_fragment) + "/" + std::to_string(assembly_->fragments) +
        " of message " + std::to_string(assembly_->message_id));
  }
  Assembly& assembly = *assembly_;
  const bool last = fields.fragment_index + 1 == fields.fragment_count;
  if (last ? payload.size() > assembly.fragment_bytes : payload.size() != assembly.fragment_bytes) {
    return protocol_error("fragment " + std::to_string(fields.fragment_index) + " of message " +
                          std::to_string(fields.message_id) + " carries " +
                          std::to_string(payload.size()) + " bytes, its fragments carry " +
                          std::to_string(assembly.fragment_bytes));
  }
  if (assembly.bytes.size() + payload.size() > config_.max_message_bytes) {
    return protocol_error("message " + std::to_string(fields.message_id) + " passes " +
                          std::to_string(config_.max_message_bytes) + " bytes");
  }
  assembly.bytes.insert(assembly.bytes.end(), payload.begin(), payload.end());
  if (++assembly.next_fragment < assembly.fragments) return {};
  ++counters_.messages_delivered;
  counters_.bytes_delivered += assembly.bytes.size();
  ready_fragments_ += assembly.fragments;
  ready_.push_back({{assembly.message_id, std::move(assembly.bytes)}, assembly.fragments});
  assembly_.reset();
  ++next_message_id_;
  return {};
}

Status PeerReceiver::start_message(const DataFields& fields, std::span<const std::byte> payload) {
  if (fields.message_id != next_message_id_ || fields.fragment_index != 0) {
    return protocol_error("sequence " + std::to_string(fields.sequence) + " is fragment " +
                          std::to_string(fields.fragment_index) + " of message " +
                          std::to_string(fields.message_id) + ", expected fragment 0 of message " +
                          std::to_string(next_message_id_));
  }
  const uint64_t smallest = uint64_t{fields.fragment_count - 1} * payload.size() + 1;
  if (smallest > config_.max_message_bytes) {
    return protocol_error("message " + std::to_string(fields.message_id) + " of " +
                          std::to_string(fields.fragment_count) + " fragments of " +
                          std::to_string(payload.size()) + " bytes passes " +
                          std::to_string(config_.max_message_bytes) + " bytes");
  }
  assembly_ = Assembly{};
  assembly_->message_id = fields.message_id;
  assembly_->fragments = fields.fragment_count;
  assembly_->fragment_bytes = payload.size();
  assembly_->bytes.reserve(std::min<uint64_t>(uint64_t{fields.fragment_count} * payload.size(),
                                              config_.max_message_bytes));
  return {};
}

Status PeerReceiver::protocol_error(const std::string& what) {
  failure_ = Status(ErrorCode::kMalformedFrame, "rank " + std::to_string(peer_rank_) + ": " + what);
  return failure_;
}

void PeerReceiver::advance_right_edge() {
  const uint64_t taken_up = std::min<uint64_t>(ready_fragments_, config_.receive_window_packets);
  right_edge_ = std::max(right_edge_, expected_ + config_.receive_window_packets - taken_up);
}

}  // namespace gradgate::gateway::reliable
