#include "gateway/transport/reliable/session.h"

#include <algorithm>
#include <string>
#include <utility>

namespace gradgate::gateway::reliable {
namespace {

/// Replaced peer epochs remembered, so that their late packets cannot restart the session.
constexpr std::size_t kReplacedEpochs = 8;

std::optional<Clock::time_point> earliest(std::optional<Clock::time_point> a,
                                          std::optional<Clock::time_point> b) {
  if (!a) return b;
  if (!b) return a;
  return std::min(*a, *b);
}

}  // namespace

Session::Session(const Config& config, const SessionAddress& address)
    : config_(config),
      address_(address),
      sender_(config, address.peer_rank),
      receiver_(config, address.peer_rank) {}

Result<uint64_t> Session::send(Message message, Clock::time_point now) {
  if (!status_.ok()) {
    return Status(ErrorCode::kUnavailable,
                  "rank " + std::to_string(address_.peer_rank) + " is lost: " + status_.message());
  }
  return sender_.enqueue(std::move(message), now);
}

Status Session::on_datagram(std::span<const std::byte> datagram, Clock::time_point now) {
  Result<PacketView> packet = decode_packet(datagram);
  if (!packet.ok()) {
    ++counters_.malformed;
    return packet.status();
  }
  const PacketHeader& from = packet->header;
  if (Status addressed = check_addressed_to_us(from); !addressed.ok()) {
    ++counters_.foreign;
    return addressed;
  }
  if (!status_.ok()) return status_;
  if (std::find(replaced_epochs_.begin(), replaced_epochs_.end(), from.sender_epoch) !=
      replaced_epochs_.end()) {
    ++counters_.stale;
    return {};
  }
  if (from.sender_epoch != peer_epoch_) {
    if (peer_epoch_ != 0) start_over();
    peer_epoch_ = from.sender_epoch;
  }
  last_heard_ = now;
  if (from.receiver_epoch != 0 && from.receiver_epoch != address_.local_epoch) {
    ++counters_.stale;
    if (packet->type == PacketType::kData) receiver_.request_ack();
    return {};
  }
  if (packet->type == PacketType::kAck) return sender_.on_ack(packet->ack, now);
  Status taken = receiver_.on_data(packet->data, packet->payload, now);
  if (!taken.ok()) status_ = taken;
  return taken;
}

std::vector<OutgoingData> Session::poll(Clock::time_point now) {
  if (!status_.ok()) return {};
  if (const auto quiet = quiet_since(); quiet && now >= *quiet + config_.peer_timeout) {
    status_ =
        Status(ErrorCode::kUnavailable,
               "no packet from rank " + std::to_string(address_.peer_rank) + " for " +
                   std::to_string(config_.peer_timeout.count()) + " ms while data is outstanding");
    return {};
  }
  std::vector<OutgoingData> out = sender_.poll(now);
  if (sender_.failure()) status_ = sender_.failure()->status;
  return out;
}

std::optional<AckFields> Session::take_ack(Clock::time_point now) {
  if (!status_.ok() || peer_epoch_ == 0) return std::nullopt;
  return receiver_.take_ack(now);
}

Result<std::size_t> Session::encode(const OutgoingData& data, std::span<std::byte> out) const {
  return encode_data(header(), data.fields, data.payload(), out);
}

Result<std::size_t> Session::encode(const AckFields& ack, std::span<std::byte> out) const {
  return encode_ack(header(), ack, out);
}

std::optional<Clock::time_point> Session::next_timer() const {
  if (!status_.ok()) return std::nullopt;
  std::optional<Clock::time_point> next = earliest(sender_.next_timer(), receiver_.next_ack_time());
  if (const auto quiet = quiet_since()) next = earliest(next, *quiet + config_.peer_timeout);
  return next;
}

PacketHeader Session::header() const {
  return {address_.job_id, address_.local_rank, address_.peer_rank, address_.local_epoch,
          peer_epoch_};
}

Status Session::check_addressed_to_us(const PacketHeader& header) const {
  if (header.job_id == address_.job_id && header.sender_rank == address_.peer_rank &&
      header.receiver_rank == address_.local_rank) {
    return {};
  }
  return Status(
      ErrorCode::kIncompatible,
      "packet of job " + std::to_string(header.job_id) + " from rank " +
          std::to_string(header.sender_rank) + " to rank " + std::to_string(header.receiver_rank) +
          "; this session is job " + std::to_string(address_.job_id) + " from rank " +
          std::to_string(address_.peer_rank) + " to rank " + std::to_string(address_.local_rank));
}

void Session::start_over() {
  replaced_epochs_.push_back(peer_epoch_);
  if (replaced_epochs_.size() > kReplacedEpochs) replaced_epochs_.pop_front();
  ++counters_.peer_restarts;
  counters_.messages_aborted += sender_.pending_messages();
  sender_ = PeerSender(config_, address_.peer_rank);
  receiver_ = PeerReceiver(config_, address_.peer_rank);
  peer_restarted_ = true;
}

std::optional<Clock::time_point> Session::quiet_since() const {
  const std::optional<Clock::time_point> since = sender_.outstanding_since();
  if (!since) return std::nullopt;
  return last_heard_ ? std::max(*since, *last_heard_) : *since;
}

}  // namespace gradgate::gateway::reliable
