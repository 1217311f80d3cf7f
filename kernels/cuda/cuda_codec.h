// The base of the CUDA codecs: CodecBase on device memory, with DeviceStreams, and the steps every
// device encode, decode and add shares. Every call is synchronous: it enqueues its kernels, waits
// for them and returns their outcome. encode runs on ctx.cuda_stream; decode, decode_accumulate
// and add_frames, which get no StepContext, on the calling thread's default stream
// (cudaStreamPerThread). Buffers are device memory; frames must be 4-byte aligned.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <utility>

#include "codec_base.h"
#include "gradgate/kernels/cuda/device_stream.h"
#include "launch.h"
#include "scratch.h"

namespace gradgate::kernels::cuda {

class CudaCodec : public CodecBase {
 public:
  explicit CudaCodec(const CodecParams& params) : CodecBase(params, /*device=*/true) {}

  /// A DeviceStream, with a residual when the codec is lossy and error feedback is on.
  Result<std::unique_ptr<Stream>> make_stream(const TensorDesc& desc) const override;
  /// encode() into a temporary device frame, then add_frames(): codecs whose encode is more than
  /// a copy gain nothing from fusing the two.
  Result<size_t> encode_add(int round, const StepContext& ctx, std::span<const float> grad,
                            Stream& stream, const FrameView& other,
                            std::span<std::byte> out) const override;
  /// Both are decode_into(), which overwrites `out` or adds to it.
  Status decode(const FrameView& frame, const Stream* stream, std::span<float> out) const final {
    return decode_into(frame, stream, out, /*overwrite=*/true);
  }
  Status decode_accumulate(const FrameView& frame, const Stream* stream,
                           std::span<float> acc) const final {
    return decode_into(frame, stream, acc, /*overwrite=*/false);
  }

 protected:
  /// The codec's decode: out = decoded frame when `overwrite`, else out += decoded frame.
  virtual Status decode_into(const FrameView& frame, const Stream* stream, std::span<float> out,
                             bool overwrite) const = 0;

  /// Waits for a CUDA stream when it goes out of scope. A call that returns early (a check that
  /// fails after its kernels were enqueued, a launch that fails after others) then leaves nothing
  /// running on the caller's buffers or on the thread's tally, which the next call, perhaps on
  /// another stream, zeroes and counts into. After a finished call the wait costs microseconds.
  class StreamFence {
   public:
    explicit StreamFence(cudaStream_t stream) : stream_(stream) {}
    StreamFence(StreamFence&& other) noexcept
        : stream_(other.stream_), armed_(std::exchange(other.armed_, false)) {}
    StreamFence(const StreamFence&) = delete;
    StreamFence& operator=(const StreamFence&) = delete;
    StreamFence& operator=(StreamFence&&) = delete;
    ~StreamFence() {
      if (armed_) static_cast<void>(cudaStreamSynchronize(stream_));
    }

   private:
    cudaStream_t stream_;
    bool armed_ = true;
  };

  /// Where one device operation runs: its CUDA stream and the thread's scratch, tally zeroed;
  /// the stream is waited for when the call ends (StreamFence).
  struct Call {
    cudaStream_t cuda;
    Scratch* scratch;
    StreamFence fence{cuda};
    Tally* tally() const { return scratch->device_tally(); }
  };

  /// An encode after the checks every encode makes.
  struct Encode : Call {
    DeviceStream* stream = nullptr;
    float* residual = nullptr;  // nullptr without one
    FrameHeader header{};
    CrcSink sink{};  // the body: the payload after `prefix_bytes`
  };

  /// An add_frames after the checks every add makes.
  struct Add : Call {
    size_t bytes;  // the sum's frame size: a's
    CrcSink sink;  // the body of the sum: its payload after `prefix_bytes`
  };

  /// CodecBase::check_encode, a stream of a CUDA codec, a 4-byte aligned `out`; then the header of
  /// a frame of `frame_bytes` with `param` and the sink of its body. Sets the stream's
  /// last_encode_passes() to 1: codecs that rescan set it again.
  Result<Encode> begin_encode(int round, const StepContext& ctx, std::span<const float> grad,
                              Stream& stream, std::span<std::byte> out, size_t frame_bytes,
                              size_t prefix_bytes, uint32_t param = 0) const;
  /// CodecBase::check_add, the codec's `check` of a then b, 4-byte aligned a, b and `out`; then
  /// the sink of the body of a sum with a's header whose payload starts with `prefix_bytes`.
  Result<Add> begin_add(const FrameView& a, const FrameView& b, std::span<std::byte> out,
                        size_t prefix_bytes,
                        const std::function<Status(const FrameView&)>& check) const;
  /// Waits for an add of frames of floating values (none, fp16, bf16) whose kernels tallied the
  /// bad values of a and b in count[0] and count[1], and reports them; returns the tally.
  static Result<Tally> finish_add(const Call& call, const FrameView& a, const FrameView& b);
  /// decode (overwrite) or decode_accumulate of a checked frame of floating values (none, fp16,
  /// bf16): `decode_values(call, overwrite)` decodes it into the output, tallying its bad values
  /// in count[0] when it overwrites (they are reported after); before accumulating,
  /// `count_nonfinite(call)` tallies them there and they are reported with the output untouched.
  static Status decode_floats(const FrameView& frame, bool overwrite,
                              const std::function<Status(const Call&)>& count_nonfinite,
                              const std::function<Status(const Call&, bool)>& decode_values);
  /// A decode or add on the calling thread's default stream.
  static Result<Call> begin_call();
  /// The sink for a frame being written at `out` whose payload starts with `prefix_bytes`.
  static Result<CrcSink> crc_sink(std::span<std::byte> out, const FrameHeader& header,
                                  size_t prefix_bytes);
  /// kInvalidArgument unless the frame's payload (and so the frame) is 4-byte aligned.
  Status check_aligned(const FrameView& frame) const;
  /// kInvalidArgument unless `out` is 4-byte aligned.
  Status check_aligned(std::span<std::byte> out) const;

  template <typename T>
  static const T* payload_at(const FrameView& frame, size_t offset = 0) {
    return reinterpret_cast<const T*>(frame.payload.data() + offset);
  }
  template <typename T>
  static T* frame_at(std::span<std::byte> out, size_t offset) {
    return reinterpret_cast<T*>(out.data() + offset);
  }
};

}  // namespace gradgate::kernels::cuda
