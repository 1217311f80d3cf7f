// The state of one running all-reduce on this gateway and the steps the algorithms are made of:
// encode a chunk, send a frame, take the matching frame from a peer, add or decode frames. Each
// step keeps the report's byte and time counts. Internal to the collective layer.
//
// Frames live in message-shaped buffers (a Mail: envelope space, then the frame) from the moment
// they are encoded, added or received, so that sending or forwarding one writes its envelope in
// place and never copies the frame.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "gateway/collective/collective_engine.h"

namespace gradgate::gateway {

class Operation {
 public:
  Operation(const CollectiveOptions& options, Transport& transport, Mailbox& mailbox,
            const AllreduceOp& op);

  const AllreduceOp& op() const { return op_; }
  uint32_t rank() const { return options_.rank; }
  uint32_t nodes() const { return options_.nodes; }
  const kernels::Codec& codec() const { return *op_.codec; }
  TensorStreams& streams() const { return *op_.streams; }
  std::span<float> chunk_data(size_t chunk) const;
  AllreduceReport& report() { return report_; }

  /// For codecs that need it: agrees with every gateway on the scale of each chunk (the max of
  /// every gateway's local_scale), one small message to each peer.
  Status agree_scales();
  /// Encodes `round` of this gateway's data of chunk `chunk` with the chunk's stream (at the
  /// agreed scale, for codecs that need one).
  Result<Mail> encode(int round, size_t chunk);
  /// Aggregator: encodes `sum`, every gateway's data of chunk `chunk` (which this gateway owns)
  /// added up, with the owner's stream and at the sum's own scale: an agreed scale bounds each
  /// gateway's values, not their sum.
  Result<Mail> encode_owned_sum(size_t chunk, std::span<const float> sum);
  /// The header of `frame` checked to belong to this operation's stream of `chunk`. Frames are
  /// checksummed once, when they arrive (receive_frame); the ones this gateway made are trusted.
  Result<kernels::FrameView> parse(std::span<const std::byte> frame, size_t chunk) const;
  /// Summable codecs: this gateway's frame of `chunk` (round `round`) added to `other`, a frame
  /// of the same chunk from a peer, in one pass where the codec can.
  Result<Mail> encode_add(int round, size_t chunk, std::span<const std::byte> other);
  /// a + b, for summable codecs.
  Result<Mail> add(std::span<const std::byte> a, std::span<const std::byte> b, size_t chunk);
  /// acc += decode(frame).
  Status decode_into(std::span<const std::byte> frame, size_t chunk, std::span<float> acc);
  /// chunk_data(chunk) = decode(frame): for a result that is one frame per chunk.
  Status decode_chunk(std::span<const std::byte> frame, size_t chunk);
  /// Feeds `frame` (an exchanged sum or aggregate of `round`) into chunk `chunk`'s stream.
  Status absorb(int round, std::span<const std::byte> frame, size_t chunk);

  /// Writes the envelope into `mail` and makes it a message that can go to several peers.
  /// The envelope carries report().stamp so far.
  Message stamp(Mail&& mail, MessageKind kind, uint32_t phase, size_t chunk) const;
  Status send(uint32_t to, const Message& message);
  /// Takes the message; its envelope's stamp is heard into report().stamp.
  Result<Mail> receive(uint32_t from, MessageKind kind, uint32_t phase, size_t chunk);
  /// receive() of a message that carries a frame, whose checksum and lengths are verified.
  Result<Mail> receive_frame(uint32_t from, MessageKind kind, uint32_t phase, size_t chunk);

  /// The message that tells the peers this gateway gave up on the operation, and why.
  Message abort_message(const Status& why) const;

 private:
  /// The step context of `chunk`'s stream (with its agreed scale, once agreed).
  kernels::StepContext step_of(size_t chunk) const;
  /// A mail with room for a frame of `stream`, filled by `write`, which returns the frame's size.
  /// On the device `write` fills GPU memory, then copied into the mail.
  Result<Mail> make_frame(const kernels::Stream& stream,
                          const std::function<Result<size_t>(std::span<std::byte>)>& write);
  bool on_device() const { return op_.memory == kernels::MemoryKind::kDevice; }
  /// The codec that adds frames held in host memory: the CPU twin of a CUDA codec on the device.
  const kernels::Codec& frame_codec() const { return on_device() ? *op_.host_codec : codec(); }
  /// The view the codec decodes: `view` itself, or on the device a copy of its frame in GPU memory.
  Result<kernels::FrameView> codec_view(const kernels::FrameView& view,
                                        std::span<const std::byte> frame);

  const CollectiveOptions& options_;
  Transport& transport_;
  Mailbox& mailbox_;
  const AllreduceOp& op_;
  kernels::StepContext step_;
  Clock::time_point deadline_;
  std::vector<uint64_t> down_counts_;
  std::vector<float> agreed_scales_;
  AllreduceReport report_;
};

/// The frame a message or mail carries.
inline std::span<const std::byte> frame_of(const Message& message) {
  return std::span<const std::byte>(*message).subspan(kEnvelopeBytes);
}

Status run_ring(Operation& operation);
Status run_all_gather(Operation& operation);
Status run_aggregator(Operation& operation);

}  // namespace gradgate::gateway
