// How one tensor is all-reduced, decided once when it is declared: the algorithm, the chunks it is
// cut into, and the codec streams (error-feedback residuals) that live as long as the tensor.
//
//   ring        summable single-round codecs: the tensor is cut into one chunk per gateway, each
//               with its own stream; frames are added hop by hop (reduce-scatter) and the summed
//               chunk frames passed around (all-gather). Each gateway sends 2(P-1)/P frames.
//   all-gather  every other codec: each gateway sends its whole frame to every other one and
//               decodes (or, for summable multi-round codecs like powersgd, adds) them in rank
//               order.
//   aggregator  non-summable codecs at scale: chunk c's frames go to gateway c, which decodes and
//               sums them, re-compresses the sum with its own error feedback and sends that back
//               to everyone (parameter-server style, sharded).
//   local       a job of one gateway: the node's sum is the result; nothing is encoded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "gateway/config/gateway_config.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/status.h"

namespace gradgate::gateway {

enum class Algorithm : uint8_t { kLocal, kRing, kAllGather, kAggregator };

std::string_view algorithm_name(Algorithm algorithm);

/// The algorithm for `codec` under `mode` in a job of `nodes` gateways, for a tensor of `elements`.
/// kInvalidArgument when the mode cannot run the codec (ring with a non-summable codec).
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
  std::vector<Chunk> chunks;  // one per stream
  std::vector<std::unique_ptr<kernels::Stream>> streams;
  /// Aggregator mode: the error feedback of the sum this gateway re-compresses (its own chunk).
  std::unique_ptr<kernels::Stream> owner_stream;

  size_t memory_bytes() const;
};

/// The streams of a tensor for `algorithm`; `desc` describes the whole tensor. Chunk streams get
/// tensor ids derived from desc.tensor_id so that every gateway names them alike.
Result<TensorStreams> make_tensor_streams(const kernels::Codec& codec,
                                          const kernels::TensorDesc& desc, Algorithm algorithm,
                                          uint32_t nodes, uint32_t rank);

/// Adds every residual of `streams` (gateway `rank`'s) into `data` where its chunk lies: what
/// error feedback still owes the job goes out with this step, before the streams are replaced.
void fold_residuals(const TensorStreams& streams, uint32_t rank, std::span<float> data);

}  // namespace gradgate::gateway
