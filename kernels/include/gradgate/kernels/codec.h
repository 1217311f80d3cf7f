// The codec interface: every gradient compressor implements it, on the CPU and on CUDA.
//
// A Codec is immutable once made (its parameters are fixed) and is safe to share between threads;
// all mutable state of one gradient stream (one tensor of one job on one worker) lives in a
// Stream, which one thread at a time may use.
//
// One step of one stream on one worker, as a collective drives it:
//
//   if codec.needs_agreed_scale():
//     ctx.agreed_scale = max over workers of codec.local_scale(grad, stream)
//   for round r in [0, codec.rounds()):
//     frame_r = codec.encode(r, ctx, grad, stream, out)          // error feedback happens here
//     exchange: summable() -> every worker gets sum_r, the add_frames() of all workers' frames
//               otherwise  -> every worker gets all workers' frames
//     if codec.rounds() > 1: codec.absorb(r, sum_r, stream)
//   decode_accumulate(final frame(s), stream, acc)              // acc += decoded aggregate
//
// Error-feedback invariant (tested for every codec): after a step, on one worker,
//   grad + residual_before == decoded(own frames) + residual_after   (to float rounding).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "gradgate/base/status.h"
#include "gradgate/kernels/frame.h"

namespace gradgate::kernels {

/// Where a buffer lives. CPU codecs accept kHost and kPinned; device buffers go to CUDA codecs.
enum class MemoryKind : uint8_t { kHost, kPinned, kDevice };

/// What a stream compresses: a dense fp32 tensor of `elements` values, optionally a matrix.
struct TensorDesc {
  uint32_t job_id = 0;
  uint32_t tensor_id = 0;
  size_t elements = 0;
  /// Optional 2-D shape (rows * cols == elements), used by powersgd; 0 means "1-D".
  size_t rows = 0;
  size_t cols = 0;
};

/// Per-step inputs that are the same for every tensor of the step.
struct StepContext {
  uint64_t step = 0;
  uint32_t policy_version = 0;
  /// This worker's rank: seeds randomness that must differ between workers (stochastic rounding).
  uint32_t worker = 0;
  /// Shared by all workers of a job: seeds randomness that must agree (random-k indices,
  /// powersgd's initial basis).
  uint64_t job_seed = 0;
  /// For codecs with needs_agreed_scale(): the max over all workers of local_scale(). A value <= 0
  /// means "not agreed": the codec then uses its own local_scale() (single-worker use).
  float agreed_scale = 0.0f;
  MemoryKind memory = MemoryKind::kHost;
  /// CUDA stream (cudaStream_t) for device buffers; ignored on the host.
  void* cuda_stream = nullptr;
};

/// Mutable state of one gradient stream: the error-feedback residual and codec-specific state
/// (top-k's last threshold, powersgd's basis). Made by Codec::make_stream for one TensorDesc.
class Stream {
 public:
  explicit Stream(const TensorDesc& desc, bool with_residual);
  virtual ~Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  const TensorDesc& desc() const { return desc_; }
  /// The error-feedback residual (empty for lossless codecs or when error feedback is off).
  std::span<float> residual() {
    sync_residual();
    return residual_;
  }
  std::span<const float> residual() const {
    sync_residual();
    return residual_;
  }
  /// Bytes this stream holds (residual and codec state), for memory caps and metrics.
  virtual size_t memory_bytes() const { return residual_.size() * sizeof(float); }

 protected:
  /// The residual as stored, without the fixes a codec may hold aside to apply during its next
  /// pass over it (a codec's own encode works on this one).
  std::span<float> stored_residual() const { return residual_; }
  /// Folds the fixes held aside into the stored residual. Logically const: the residual's value
  /// does not change, only where part of it is kept.
  virtual void sync_residual() const {}

 private:
  TensorDesc desc_;
  std::unique_ptr<float[]> residual_storage_;
  std::span<float> residual_;
};

class Codec {
 public:
  virtual ~Codec() = default;

  virtual CodecId id() const = 0;
  /// The codec and its parameters, in the spec syntax of parse_codec_spec ("topk:density=0.01").
  virtual std::string spec() const = 0;
  /// True when frames of the same stream, step and round from different workers can be added
  /// with add_frames() without decoding, and the decoded sum equals the sum of the decoded frames
  /// (exactly for integer payloads, to the payload's rounding for floating ones).
  virtual bool summable() const = 0;
  /// How many workers' frames one sum of add_frames() may hold: qsgd's `workers` (its headroom
  /// bits), unbounded for the other summable codecs, 1 for codecs that are not summable. A
  /// collective over more gateways decodes their frames one by one instead of summing them.
  virtual uint64_t max_summands() const { return summable() ? UINT64_MAX : 1; }
  /// Exchange rounds per step (powersgd: 2, everything else: 1).
  virtual int rounds() const { return 1; }
  /// True when encode() quantises against a scale that all workers must agree on (qsgd).
  virtual bool needs_agreed_scale() const { return false; }

  /// A new stream for `desc` with a zero residual. kInvalidArgument if the codec cannot take
  /// such a tensor.
  virtual Result<std::unique_ptr<Stream>> make_stream(const TensorDesc& desc) const = 0;

  /// This worker's candidate for the agreed scale (qsgd: max |grad + residual|). Reads only.
  virtual float local_scale(std::span<const float> grad, const Stream& stream) const;

  /// Upper bound of the frame size (header included) of any round for a stream of `desc`; exact
  /// for codecs whose size does not depend on the data.
  virtual size_t max_frame_bytes(const TensorDesc& desc) const = 0;

  /// Encodes round `round` of `grad` (stream.desc().elements values) into `out` and applies error
  /// feedback to the stream's residual. Returns the frame's size. On error (non-finite gradient,
  /// `out` too small) the residual is left as it was, to float rounding.
  virtual Result<size_t> encode(int round, const StepContext& ctx, std::span<const float> grad,
                                Stream& stream, std::span<std::byte> out) const = 0;

  /// Feeds the exchanged sum (or the aggregate) of round `round` back into the stream: a
  /// multi-round codec needs it to go on; topk with an overlap share remembers its indices for
  /// the next step. No-op for the others.
  virtual Status absorb(int round, const FrameView& summed, Stream& stream) const;

  /// Adds the decoded frame to `acc` (frame.header.element_count values). Validates the whole
  /// payload first: on error `acc` is untouched. `stream` is needed by codecs whose frames are
  /// relative to shared state (powersgd); others accept nullptr.
  virtual Status decode_accumulate(const FrameView& frame, const Stream* stream,
                                   std::span<float> acc) const = 0;

  /// Writes the frame whose decoding is the sum of decoding `a` and `b` into `out`; returns its
  /// size (at most max(a, b) frame size). kUnsupported unless summable().
  virtual Result<size_t> add_frames(const FrameView& a, const FrameView& b,
                                    std::span<std::byte> out) const;
  /// add_frames(encode(round, ctx, grad, stream), other) in one call, into `out` (room for
  /// max_frame_bytes): a ring adds each received partial sum to its own encoding of that chunk.
  /// Codecs whose encoding is cheap (none) fuse the two passes; the default encodes into a
  /// temporary frame first. kUnsupported unless summable().
  virtual Result<size_t> encode_add(int round, const StepContext& ctx, std::span<const float> grad,
                                    Stream& stream, const FrameView& other,
                                    std::span<std::byte> out) const;
  /// out = the decoded frame, for a result that is one frame (a ring's chunks): saves clearing
  /// `out` before decode_accumulate, which the default does. On error `out` holds unspecified
  /// values.
  virtual Status decode(const FrameView& frame, const Stream* stream, std::span<float> out) const;
};

}  // namespace gradgate::kernels
