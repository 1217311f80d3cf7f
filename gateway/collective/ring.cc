// Ring all-reduce over summable frames: reduce-scatter, then all-gather, P - 1 hops each. Gateway r
// sends to r + 1 and receives from r - 1. After the reduce-scatter, gateway r holds the summed
// frame of chunk r + 1; after the all-gather, every gateway holds every summed chunk frame, the
// same bytes everywhere, and decodes each into its chunk of the result. Frames travel in their
// buffers: a received frame is added into a new one or forwarded as it is.
#include <algorithm>

#include "gateway/collective/operation.h"

namespace gradgate::gateway {

Status run_ring(Operation& operation) {
  const uint32_t nodes = operation.nodes();
  const uint32_t rank = operation.rank();
  const uint32_t right = (rank + 1) % nodes;
  const uint32_t left = (rank + nodes - 1) % nodes;
  auto chunk_at = [nodes](int64_t index) {
    return static_cast<size_t>((index % nodes + nodes) % nodes);
  };

  if (operation.codec().needs_agreed_scale()) GRADGATE_RETURN_IF_ERROR(operation.agree_scales());

  // Reduce-scatter: the partial sum of one chunk travels round the ring, each gateway adding its
  // own encoding of the chunk as it passes (in one pass where the codec can).
  auto first = operation.encode(0, rank);
  if (!first.ok()) return first.status();
  Mail travelling = std::move(first).value();
  for (uint32_t hop = 0; hop + 1 < nodes; ++hop) {
    const size_t send_chunk = chunk_at(int64_t{rank} - hop);
    const size_t recv_chunk = chunk_at(int64_t{rank} - hop - 1);
    GRADGATE_RETURN_IF_ERROR(operation.send(
        right, operation.stamp(std::move(travelling), MessageKind::kRingReduce, hop, send_chunk)));
    auto mail = operation.receive_frame(left, MessageKind::kRingReduce, hop, recv_chunk);
    if (!mail.ok()) return mail.status();
    auto sum = operation.encode_add(0, recv_chunk, mail->payload());
    if (!sum.ok()) return sum.status();
    travelling = std::move(sum).value();
  }

  // All-gather: each complete chunk frame is forwarded round the ring and kept for decoding.
  std::vector<Message> complete(nodes);
  size_t travelling_chunk = chunk_at(int64_t{rank} + 1);
  for (uint32_t hop = 0; hop + 1 < nodes; ++hop) {
    const size_t recv_chunk = chunk_at(int64_t{rank} - hop);
    complete[travelling_chunk] =
        operation.stamp(std::move(travelling), MessageKind::kRingGather, hop, travelling_chunk);
    GRADGATE_RETURN_IF_ERROR(operation.send(right, complete[travelling_chunk]));
    auto mail = operation.receive_frame(left, MessageKind::kRingGather, hop, recv_chunk);
    if (!mail.ok()) return mail.status();
    travelling = std::move(mail).value();
    travelling_chunk = recv_chunk;
  }
  complete[travelling_chunk] = std::make_shared<const MessageBytes>(std::move(travelling.bytes));

  for (size_t c = 0; c < nodes; ++c) {
    GRADGATE_RETURN_IF_ERROR(operation.decode_chunk(frame_of(complete[c]), c));
  }
  return {};
}

}  // namespace gradgate::gateway
