// Ring all-reduce over summable frames: reduce-scatter, then all-gather, P - 1 hops each. Gateway r
// sends to r + 1 and receives from r - 1. After the reduce-scatter, gateway r holds the summed
// frames of part r + 1; after the all-gather, every gateway holds every summed frame, the same
// bytes everywhere, and has decoded each into its chunk of the result. Frames travel in their
// buffers: a received frame is added into a new one or forwarded as it is.
//
// The ring is pipelined over the segments of each part (tensor_streams.h): a segment goes on to
// the next hop as soon as this gateway has added its own encoding to it, so encoding, the wire
// and decoding overlap, and a large tensor never waits for a whole part's encode.
#include "gateway/collective/operation.h"

namespace gradgate::gateway {

Status run_ring(Operation& operation) {
  const uint32_t nodes = operation.nodes();
  const uint32_t rank = operation.rank();
  const uint32_t right = (rank + 1) % nodes;
  const uint32_t left = (rank + nodes - 1) % nodes;
  const TensorStreams& streams = operation.streams();
  auto part_at = [nodes](int64_t index) {
    return static_cast<size_t>((index % nodes + nodes) % nodes);
  };

  if (operation.codec().needs_agreed_scale()) GRADGATE_RETURN_IF_ERROR(operation.agree_scales());

  // Reduce-scatter: the partial sum of each segment travels round the ring, each gateway adding
  // its own encoding of the segment as it passes (in one pass where the codec can). The last hop
  // completes the segments of part r + 1, which start the all-gather at once.
  for (uint32_t segment = 0; segment < streams.segments; ++segment) {
    const size_t chunk = streams.chunk_of(rank, segment);
    auto own = operation.encode(0, chunk);
    if (!own.ok()) return own.status();
    GRADGATE_RETURN_IF_ERROR(operation.send(
        right, operation.stamp(std::move(own).value(), MessageKind::kRingReduce, 0, chunk)));
  }
  for (uint32_t hop = 0; hop + 1 < nodes; ++hop) {
    const bool last = hop + 2 == nodes;
    const size_t part = part_at(int64_t{rank} - hop - 1);
    for (uint32_t segment = 0; segment < streams.segments; ++segment) {
      const size_t chunk = streams.chunk_of(part, segment);
      auto mail = operation.receive_frame(left, MessageKind::kRingReduce, hop, chunk);
      if (!mail.ok()) return mail.status();
      auto sum = operation.encode_add(0, chunk, mail->payload());
      if (!sum.ok()) return sum.status();
      const Message next = operation.stamp(
          std::move(sum).value(), last ? MessageKind::kRingGather : MessageKind::kRingReduce,
          last ? 0 : hop + 1, chunk);
      GRADGATE_RETURN_IF_ERROR(operation.send(right, next));
      if (last) GRADGATE_RETURN_IF_ERROR(operation.decode_chunk(frame_of(next), chunk));
    }
  }

  // All-gather: each complete segment is forwarded round the ring and decoded into the result.
  for (uint32_t hop = 0; hop + 1 < nodes; ++hop) {
    const size_t part = part_at(int64_t{rank} - hop);
    for (uint32_t segment = 0; segment < streams.segments; ++segment) {
      const size_t chunk = streams.chunk_of(part, segment);
      auto mail = operation.receive_frame(left, MessageKind::kRingGather, hop, chunk);
      if (!mail.ok()) return mail.status();
      if (hop + 2 < nodes) {
        const Message forward =
            operation.stamp(std::move(mail).value(), MessageKind::kRingGather, hop + 1, chunk);
        GRADGATE_RETURN_IF_ERROR(operation.send(right, forward));
        GRADGATE_RETURN_IF_ERROR(operation.decode_chunk(frame_of(forward), chunk));
      } else {
        GRADGATE_RETURN_IF_ERROR(operation.decode_chunk(mail->payload(), chunk));
      }
    }
  }
  return {};
}

}  // namespace gradgate::gateway
