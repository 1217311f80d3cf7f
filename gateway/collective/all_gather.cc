// All-gather of whole frames: every gateway sends its frame of each round to every other one.
// Summable codecs (powersgd's two rounds) add the frames in rank order and feed the sum back into
// the stream; the others decode every frame in rank order into the result. Either way every
// gateway combines the same bytes in the same order, so the results are bit-identical.
#include <algorithm>

#include "gateway/collective/operation.h"

namespace gradgate::gateway {

Status run_all_gather(Operation& operation) {
  const uint32_t nodes = operation.nodes();
  const uint32_t rank = operation.rank();
  const kernels::Codec& codec = operation.codec();
  if (codec.needs_agreed_scale()) GRADGATE_RETURN_IF_ERROR(operation.agree_scales());

  std::vector<Message> frames(nodes);
  for (int round = 0; round < codec.rounds(); ++round) {
    auto own = operation.encode(round, 0);
    if (!own.ok()) return own.status();
    frames[rank] = operation.stamp(std::move(own).value(), MessageKind::kGather, round, 0);
    for (uint32_t peer = 0; peer < nodes; ++peer) {
      if (peer != rank) GRADGATE_RETURN_IF_ERROR(operation.send(peer, frames[rank]));
    }
    for (uint32_t peer = 0; peer < nodes; ++peer) {
      if (peer == rank) continue;
      auto mail = operation.receive_frame(peer, MessageKind::kGather, round, 0);
      if (!mail.ok()) return mail.status();
      frames[peer] = std::make_shared<const MessageBytes>(std::move(mail->bytes));
    }
    if (!codec.summable()) break;  // single-round: decoded frame by frame below
    Message sum = frames[0];
    for (uint32_t peer = 1; peer < nodes; ++peer) {
      auto next = operation.add(frame_of(sum), frame_of(frames[peer]), 0);
      if (!next.ok()) return next.status();
      sum = std::make_shared<const MessageBytes>(std::move(next->bytes));
    }
    if (round + 1 < codec.rounds()) {
      GRADGATE_RETURN_IF_ERROR(operation.absorb(round, frame_of(sum), 0));
      continue;
    }
    frames.assign(1, std::move(sum));
  }

  GRADGATE_RETURN_IF_ERROR(operation.decode_chunk(frame_of(frames[0]), 0));
  for (size_t f = 1; f < frames.size(); ++f) {
    GRADGATE_RETURN_IF_ERROR(operation.decode_into(frame_of(frames[f]), 0, operation.op().data));
  }
  return {};
}

}  // namespace gradgate::gateway
