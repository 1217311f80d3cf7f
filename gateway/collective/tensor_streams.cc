#include "gateway/collective/tensor_streams.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "gradgate/base/check.h"

namespace gradgate::gateway {

std::string_view algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kLocal:
      return "local";
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kAllGather:
      return "allgather";
    case Algorithm::kAggregator:
      return "aggregator";
  }
  return "unknown";
}

Result<Algorithm> choose_algorithm(const kernels::Codec& codec, CollectiveMode mode, uint32_t nodes,
                                   size_t elements) {
  if (nodes <= 1) return Algorithm::kLocal;
  if (codec.rounds() > 1 && !sums_frames_of(codec, nodes)) {
    // All-gather absorbs the sum of each round but the last: frames decoded one by one cannot.
    return Status(ErrorCode::kInvalidArgument,
                  "codec " + codec.spec() + " runs " + std::to_string(codec.rounds()) +
                      " rounds, and its sum cannot hold the frames of all " +
                      std::to_string(nodes) + " gateways");
  }
  const bool ring_fits = sums_frames_of(codec, nodes) && codec.rounds() == 1 && elements >= nodes;
  switch (mode) {
    case CollectiveMode::kAuto:
      return ring_fits ? Algorithm::kRing : Algorithm::kAllGather;
    case CollectiveMode::kRing:
      if (ring_fits) return Algorithm::kRing;
      return Status(ErrorCode::kInvalidArgument,
                    "collective ring needs a single-round codec that sums the frames of all " +
                        std::to_string(nodes) +
                        " gateways, and at least one element per "
                        "gateway; codec " +
                        codec.spec() + " on " + std::to_string(elements) +
                        " elements cannot use it");
    case CollectiveMode::kAllGather:
      return Algorithm::kAllGather;
    case CollectiveMode::kAggregator:
      if (codec.rounds() == 1 && elements >= nodes) return Algorithm::kAggregator;
      return Algorithm::kAllGather;
  }
  return Status(ErrorCode::kInternal, "unknown collective mode");
}

std::vector<Chunk> split_chunks(size_t elements, uint32_t parts) {
  std::vector<Chunk> chunks(parts);
  const size_t base = elements / parts;
  const size_t extra = elements % parts;
  size_t offset = 0;
  for (uint32_t i = 0; i < parts; ++i) {
    chunks[i] = {offset, base + (i < extra ? 1 : 0)};
    offset += chunks[i].elements;
  }
  return chunks;
}

size_t TensorStreams::memory_bytes() const {
  size_t bytes = owner_stream ? owner_stream->memory_bytes() : 0;
  for (const auto& stream : streams) bytes += stream->memory_bytes();
  return bytes;
}

namespace {

/// Segments per part: enough that none exceeds `segment_elements`, no more than the smallest part
/// has elements, and no more than the chunk numbering allows.
uint32_t segments_per_part(const std::vector<Chunk>& parts, size_t segment_elements) {
  size_t largest = 0;
  size_t smallest = SIZE_MAX;
  for (const Chunk& part : parts) {
    largest = std::max(largest, part.elements);
    smallest = std::min(smallest, part.elements);
  }
  if (segment_elements == 0 || largest <= segment_elements) return 1;
  const size_t wanted = (largest + segment_elements - 1) / segment_elements;
  return static_cast<uint32_t>(
      std::max<size_t>(1, std::min({wanted, smallest, kMaxChunks / parts.size()})));
}

}  // namespace

Result<TensorStreams> make_tensor_streams(const kernels::Codec& codec,
                                          const kernels::TensorDesc& desc, Algorithm algorithm,
                                          uint32_t nodes, uint32_t rank, size_t segment_elements) {
  TensorStreams result;
  result.algorithm = algorithm;
  if (algorithm == Algorithm::kLocal) {
    result.chunks = {{0, desc.elements}};
    return result;
  }
  const bool per_gateway = algorithm == Algorithm::kRing || algorithm == Algorithm::kAggregator;
  const std::vector<Chunk> parts =
      per_gateway ? split_chunks(desc.elements, nodes) : std::vector<Chunk>{{0, desc.elements}};
  const bool segmentable = algorithm != Algorithm::kAggregator && codec.rounds() == 1;
  result.segments = segmentable ? segments_per_part(parts, segment_elements) : 1;
  for (const Chunk& part : parts) {
    for (const Chunk& segment : split_chunks(part.elements, result.segments)) {
      result.chunks.push_back({part.offset + segment.offset, segment.elements});
    }
  }
  GRADGATE_DCHECK(!result.chunks.empty() &&
                      result.chunks.back().offset + result.chunks.back().elements == desc.elements,
                  "the chunks cover the tensor");
  // A tensor in one chunk is its own stream; the chunks of a cut one are told apart by tensor id.
  const bool cut = result.chunks.size() > 1;
  auto chunk_desc = [&](uint32_t index) {
    if (!cut) return desc;
    kernels::TensorDesc piece = desc;
    piece.tensor_id = desc.tensor_id ^ (0x9E3779B9u * (index + 1));
    piece.elements = result.chunks[index].elements;
    piece.rows = piece.cols = 0;
    return piece;
  };
  for (uint32_t i = 0; i < result.chunks.size(); ++i) {
    auto stream = codec.make_stream(chunk_desc(i));
    if (!stream.ok()) return stream.status();
    result.streams.push_back(std::move(stream).value());
  }
  if (algorithm == Algorithm::kAggregator) {
    auto stream = codec.make_stream(chunk_desc(rank));
    if (!stream.ok()) return stream.status();
    result.owner_stream = std::move(stream).value();
  }
  return result;
}

void fold_residuals(const TensorStreams& streams, uint32_t rank, std::span<float> data) {
  const Status folded =
      for_each_residual(streams, rank, [data](const kernels::Stream& stream, size_t offset) {
        const auto residual = stream.residual();
        GRADGATE_DCHECK(offset + residual.size() <= data.size(), "a residual past the tensor");
        for (size_t i = 0; i < residual.size(); ++i) data[offset + i] += residual[i];
        return Status();
      });
  GRADGATE_DCHECK(folded.ok(), "adding host residuals cannot fail");
}

}  // namespace gradgate::gateway
