// How one tensor is all-reduced, decided once when it is declared: the algorithm, the chunks it is
// cut into, and the codec streams (error-feedback residuals) that live as long as the tensor.
//
//   ring        summable single-round codecs: the tensor is cut into one part per gateway;
//               frames are added hop by hop (reduce-scatter) and the summed part frames passed
//               around (all-gather). Each gateway sends 2(P-1)/P of the tensor's frames.
//   all-gather  every other codec: each gateway sends its whole frame to every other one and
//               decodes (or, for summable multi-round codecs like powersgd, adds) them in rank
//               order.
//   aggregator  non-summable codecs at scale: chunk c's frames go to gateway c, which decodes and
//               sums them, re-compresses the sum with its own error feedback and sends that back
//               to everyone (parameter-server style, sharded).
//   local       a job of one gateway: the node's sum is the result; nothing is encoded.
//
// Segments: under ring and all-gather, a part larger than the segment size (collective
// .segment_bytes) is cut into segments, each a chunk with its own stream and its own frame, so that
// a large tensor streams through the collective: the first segment is on the wire while the next
// is encoded, and a segment is forwarded or decoded as soon as it arrives. Multi-round codecs
// (powersgd, whose frames depend on the tensor's shape) and the aggregator keep one chunk per part.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "gradgate/base/collective_mode.h"
#include "gradgate/base/status.h"
#include "gradgate/kernels/codec.h"

namespace gradgate::gateway {

enum class Algorithm : uint8_t { kLocal, kRing, kAllGather, kAggregator };

std::string_view algorithm_name(Algorithm algorithm);

/// Whether the collective adds the frames of `frames` gateways with add_frames (a summable codec
/// whose sum holds that many: qsgd's `workers`), rather than decoding them one by one.
inline bool sums_frames_of(const kernels::Codec& codec, uint64_t frames) {
  return codec.summable() && codec.max_summands() >= frames;
}

/// The algorithm for `codec` under `mode` in a job of `nodes` gateways, for a tensor of `elements`.
/// kInvalidArgument when the mode cannot run the codec (ring with a codec that cannot sum the
/// frames of `nodes` gateways).
Result<Algorithm> choose_algorithm(const kernels::Codec& codec, CollectiveMode mode, uint32_t nodes,
                                   size_t elements);

struct Chunk {
  size_t offset = 0;
  size_t elements = 0;
};

/// Cuts `elements` into `parts` contiguous chunks whose sizes differ by at most one.
std::vector<Chunk> split_chunks(size_t elements, uint32_t parts);

struct TensorStreams {
  Algorithm algorithm = Algorithm::kLocal;
  /// One per stream: part p's segment s is chunk p * segments + s (parts: one per gateway under
  /// ring and aggregator, one under all-gather and local).
  std::vector<Chunk> chunks;
  uint32_t segments = 1;
  std::vector<std::unique_ptr<kernels::Stream>> streams;
  /// Aggregator mode: the error feedback of the sum this gateway re-compresses (its own chunk).
  std::unique_ptr<kernels::Stream> owner_stream;

  size_t memory_bytes() const;
  /// The chunk of part `part`'s segment `segment`.
  size_t chunk_of(size_t part, uint32_t segment) const { return part * segments + segment; }
};

/// At most this many chunks per tensor: a message names its chunk in 16 bits.
inline constexpr size_t kMaxChunks = 65535;

/// The streams of a tensor for `algorithm`; `desc` describes the whole tensor. Parts larger than
/// `segment_elements` (0: no limit) are cut into segments where the algorithm and codec allow.
/// Chunk streams get tensor ids derived from desc.tensor_id so that every gateway names them
/// alike (every gateway of a job must use the same segment size).
Result<TensorStreams> make_tensor_streams(const kernels::Codec& codec,
                                          const kernels::TensorDesc& desc, Algorithm algorithm,
                                          uint32_t nodes, uint32_t rank,
                                          size_t segment_elements = 0);

/// Calls visit(stream, offset) for every stream of `streams` (gateway `rank`'s: its chunks' and,
/// in aggregator mode, its owned chunk's), with where in the tensor its chunk starts; stops at the
/// first error. The one walk
/// of both folds: fold_residuals below, and DeviceTensor::fold_residuals on the GPU.
template <typename Visit>  // Status(const kernels::Stream&, size_t offset)
Status for_each_residual(const TensorStreams& streams, uint32_t rank, Visit&& visit) {
  for (size_t c = 0; c < streams.streams.size(); ++c) {
    GRADGATE_RETURN_IF_ERROR(visit(*streams.streams[c], streams.chunks[c].offset));
  }
  if (streams.owner_stream) return visit(*streams.owner_stream, streams.chunks[rank].offset);
  return {};
}

/// Adds every residual of `streams` (gateway `rank`'s) into `data` where its chunk lies: what
/// error feedback still owes the job goes out with this step, before the streams are replaced.
void fold_residuals(const TensorStreams& streams, uint32_t rank, std::span<float> data);

}  // namespace gradgate::gateway
