// Sharded aggregation for non-summable codecs: gateway c owns chunk c. Every gateway sends its
// frame of chunk c to gateway c, which decodes and sums them in rank order, counts the nonzero
// elements of the sum (for sparse codecs: the union of the workers' indices), re-compresses the
// sum with its own error feedback, and sends that frame to everyone. Every gateway then decodes
// the owners' frames: the same bytes everywhere.
//
// The owner's send cost is the union of the workers' indices; topk's `overlap` option makes the
// workers aim at the last aggregate's indices, which every gateway absorbs into its streams.
#include <algorithm>

#include "gateway/collective/operation.h"

namespace gradgate::gateway {

Status run_aggregator(Operation& operation) {
  const uint32_t nodes = operation.nodes();
  const uint32_t rank = operation.rank();
  if (operation.codec().needs_agreed_scale()) GRADGATE_RETURN_IF_ERROR(operation.agree_scales());

  Mail own_chunk;
  for (uint32_t c = 0; c < nodes; ++c) {
    auto frame = operation.encode(0, c);
    if (!frame.ok()) return frame.status();
    if (c == rank) {
      own_chunk = std::move(frame).value();
    } else {
      GRADGATE_RETURN_IF_ERROR(operation.send(
          c, operation.stamp(std::move(frame).value(), MessageKind::kAggregateIn, 0, c)));
    }
  }

  std::vector<float> sum(operation.chunk_data(rank).size(), 0.0f);
  for (uint32_t peer = 0; peer < nodes; ++peer) {
    if (peer == rank) {
      GRADGATE_RETURN_IF_ERROR(operation.decode_into(own_chunk.payload(), rank, sum));
      continue;
    }
    auto mail = operation.receive_frame(peer, MessageKind::kAggregateIn, 0, rank);
    if (!mail.ok()) return mail.status();
    GRADGATE_RETURN_IF_ERROR(operation.decode_into(mail->payload(), rank, sum));
  }
  operation.report().union_elements = static_cast<uint64_t>(
      std::count_if(sum.begin(), sum.end(), [](float v) { return v != 0.0f; }));
  auto aggregate = operation.encode_owned_sum(rank, sum);
  if (!aggregate.ok()) return aggregate.status();
  const Message mine =
      operation.stamp(std::move(aggregate).value(), MessageKind::kAggregateOut, 0, rank);
  for (uint32_t peer = 0; peer < nodes; ++peer) {
    if (peer != rank) GRADGATE_RETURN_IF_ERROR(operation.send(peer, mine));
  }

  // Each chunk's aggregate is decoded into the result, and its stream learns the aggregate's
  // indices (topk's overlap-seeking selection aims at them next step).
  for (uint32_t c = 0; c < nodes; ++c) {
    Mail received;
    if (c != rank) {
      auto mail = operation.receive_frame(c, MessageKind::kAggregateOut, 0, c);
      if (!mail.ok()) return mail.status();
      received = std::move(mail).value();
    }
    const auto frame = c == rank ? frame_of(mine) : received.payload();
    GRADGATE_RETURN_IF_ERROR(operation.decode_chunk(frame, c));
    GRADGATE_RETURN_IF_ERROR(operation.absorb(0, frame, c));
  }
  return {};
}

}  // namespace gradgate::gateway
