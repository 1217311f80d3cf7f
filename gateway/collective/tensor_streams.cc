#include "gateway/collective/tensor_streams.h"

#include <string>

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
  const bool ring_fits = codec.summable() && codec.rounds() == 1 && elements >= nodes;
  switch (mode) {
    case CollectiveMode::kAuto:
      return ring_fits ? Algorithm::kRing : Algorithm::kAllGather;
    case CollectiveMode::kRing:
      if (ring_fits) return Algorithm::kRing;
      return Status(ErrorCode::kInvalidArgument,
                    "collective ring needs a summable single-round codec and at least one "
                    "element per gateway; codec " +
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

Result<TensorStreams> make_tensor_streams(const kernels::Codec& codec,
                                          const kernels::TensorDesc& desc, Algorithm algorithm,
                                          uint32_t nodes, uint32_t rank) {
  TensorStreams result;
  result.algorithm = algorithm;
  if (algorithm == Algorithm::kLocal) {
    result.chunks = {{0, desc.elements}};
    return result;
  }
  const bool chunked = algorithm == Algorithm::kRing || algorithm == Algorithm::kAggregator;
  result.chunks =
      chunked ? split_chunks(desc.elements, nodes) : std::vector<Chunk>{{0, desc.elements}};
  auto chunk_desc = [&](uint32_t index) {
    if (!chunked) return desc;
    kernels::TensorDesc part = desc;
    part.tensor_id = desc.tensor_id ^ (0x9E3779B9u * (index + 1));
    part.elements = result.chunks[index].elements;
    part.rows = part.cols = 0;
    return part;
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
  auto fold = [&](const kernels::Stream& stream, const Chunk& chunk) {
    const auto residual = stream.residual();
    for (size_t i = 0; i < residual.size(); ++i) data[chunk.offset + i] += residual[i];
  };
  for (size_t c = 0; c < streams.streams.size(); ++c) fold(*streams.streams[c], streams.chunks[c]);
  if (streams.owner_stream) fold(*streams.owner_stream, streams.chunks[rank]);
}

}  // namespace gradgate::gateway
