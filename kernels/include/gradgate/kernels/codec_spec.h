// Codec parameters, their text form, and the factory that makes a codec from them.
//
// Spec syntax: NAME[:KEY=VALUE[,KEY=VALUE...]], for example
//   none | fp16 | bf16 | qsgd:bits=4,workers=8 | sign |
//   topk:density=0.01,select=threshold,values=fp16,overlap=0.5 | randomk:density=0.01 |
//   powersgd:rank=4
// Every lossy codec also takes ef=0|1 (error feedback, default 1).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "gradgate/base/status.h"
#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/frame.h"

namespace gradgate::kernels {

enum class TopkSelect : uint8_t {
  kExact,      // exactly the k largest |values| (selection, not a sort)
  kThreshold,  // a count in [k, 1.1k] from a Laplace-estimated, corrected, warm-started threshold
};

enum class ValueType : uint8_t { kFp32, kFp16 };
/// topk on the GPU: how the selection's first pass loads full tiles of the gradient and residual:
/// into registers when the tile's turn comes, or staged, copied into shared memory while the tile
/// before is ranked, so that a block always has loads in flight. The same selection either way,
/// a choice of speed (kernels/cuda/PERF_NOTES.md); the CPU codec has no such pass and ignores it.
enum class TopkFirstPass : uint8_t { kRegisters, kStaged };

struct CodecParams {
  CodecId id = CodecId::kNone;
  /// Lossy codecs keep the compression error in a residual and add it to the next step.
  bool error_feedback = true;
  /// qsgd: magnitude bits q (levels s = 2^q - 1), 1..15.
  int bits = 4;
  /// qsgd: the most workers whose frames will be summed; reserves ceil(log2 workers) bits.
  int max_workers = 8;
  /// topk, randomk: fraction of elements sent, in (0, 1].
  double density = 0.01;
  TopkSelect select = TopkSelect::kThreshold;
  /// topk: precision of the values on the wire.
  ValueType values = ValueType::kFp32;
  /// topk: share of k reserved for the indices of the last aggregate the stream absorbed (the
  /// overlap-seeking selection of aggregator mode, DESIGN.md §4.3), in [0, 1). The largest
  /// |values| among those indices fill it; plain top-k the rest. Workers that pick the same
  /// indices shrink the union an aggregator re-sends.
  double overlap = 0.0;
  /// topk: the GPU selection's first pass (first_pass=registers|staged).
  TopkFirstPass first_pass = TopkFirstPass::kRegisters;
  /// powersgd: rank of the approximation, 1..64.
  int rank = 4;
};

/// qsgd: the bits reserved so that `max_workers` frames add up without overflow,
/// ceil(log2(max_workers)).
int qsgd_headroom_bits(int max_workers);
/// qsgd: bytes of one level on the wire (1, 2 or 4) for `bits` magnitude bits, a sign bit and
/// `headroom_bits`.
size_t qsgd_level_bytes(int bits, int headroom_bits);

/// Parses a spec string; kInvalidArgument names the offending key or value.
Result<CodecParams> parse_codec_spec(std::string_view spec);
/// The canonical spec string of `params` (only the keys that apply to the codec).
std::string format_codec_spec(const CodecParams& params);
/// kInvalidArgument when a parameter is out of its range.
Status validate_codec_params(const CodecParams& params);
/// What is sent with `codec` of a tensor whose elements are in `precision` (kNone: fp32; kFp16,
/// kBf16): codec none sends a 16-bit tensor as that format's codec without error feedback, dense
/// in its own precision as DDP's all-reduce sends it; every other case as it is. The gateways
/// send this and the controller's cost model prices it.
CodecParams sent_in_precision(const CodecParams& codec, CodecId precision);

/// Makes the CPU implementation of the codec: it encodes and decodes host (or pinned) memory.
Result<std::unique_ptr<Codec>> make_cpu_codec(const CodecParams& params);

}  // namespace gradgate::kernels
