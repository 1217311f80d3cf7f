#include "gateway/transport/reliable/config.h"

#include <string>

#include "gateway/transport/reliable/packet.h"

namespace gradgate::gateway::reliable {
namespace {

Status bad(const std::string& knob, const std::string& why) {
  return Status(ErrorCode::kInvalidArgument, "reliable config: " + knob + " " + why);
}

}  // namespace

Status check(const Config& config) {
  if (config.payload_bytes == 0 || config.payload_bytes > kMaxPayloadBytes) {
    return bad("payload_bytes", "must be in [1, " + std::to_string(kMaxPayloadBytes) + "]");
  }
  if (config.window_packets == 0) return bad("window_packets", "must be at least 1");
  if (config.receive_window_packets == 0) {
    return bad("receive_window_packets", "must be at least 1");
  }
  if (config.min_rto.count() <= 0) return bad("min_rto", "must be positive");
  if (config.max_rto < config.min_rto) return bad("max_rto", "must be at least min_rto");
  if (config.initial_rto < config.min_rto || config.initial_rto > config.max_rto) {
    return bad("initial_rto", "must be in [min_rto, max_rto]");
  }
  if (config.ack_every_packets == 0) return bad("ack_every_packets", "must be at least 1");
  if (config.ack_delay.count() < 0 || config.ack_delay >= config.min_rto) {
    return bad("ack_delay", "must be in [0, min_rto) (a later ACK looks like a loss)");
  }
  if (config.message_deadline.count() <= 0) return bad("message_deadline", "must be positive");
  if (config.peer_timeout < 2 * config.max_rto) {
    return bad("peer_timeout", "must be at least twice max_rto (backed-off packets need answers)");
  }
  if (config.max_message_bytes == 0) return bad("max_message_bytes", "must be at least 1");
  if ((config.max_message_bytes - 1) / config.payload_bytes >= UINT32_MAX) {
    return bad("max_message_bytes", "needs more than 2^32 - 1 fragments of payload_bytes");
  }
  if (config.max_queued_bytes < config.max_message_bytes) {
    return bad("max_queued_bytes", "must be at least max_message_bytes");
  }
  return {};
}

}  // namespace gradgate::gateway::reliable
