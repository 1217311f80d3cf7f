#include "gradgate/kernels/codec.h"

#include <algorithm>
#include <vector>

namespace gradgate::kernels {

Stream::Stream(const TensorDesc& desc, bool with_residual) : desc_(desc) {
  if (with_residual) {
    residual_storage_ = std::make_unique<float[]>(desc.elements);  // value-initialised: zeros
    residual_ = {residual_storage_.get(), desc.elements};
  }
}

float Codec::local_scale(std::span<const float>, const Stream&) const { return 0.0f; }

Status Codec::absorb(int, const FrameView&, Stream&) const { return {}; }

Result<size_t> Codec::add_frames(const FrameView&, const FrameView&, std::span<std::byte>) const {
  return Status(ErrorCode::kUnsupported,
                "codec " + std::string(codec_name(id())) + " frames are not summable");
}

Result<size_t> Codec::encode_add(int round, const StepContext& ctx, std::span<const float> grad,
                                 Stream& stream, const FrameView& other,
                                 std::span<std::byte> out) const {
  if (!summable()) return add_frames(other, other, out);  // kUnsupported, with the codec's name
  // Written whole by encode before it is read: not cleared first.
  const size_t bytes = max_frame_bytes(stream.desc());
  const auto storage = std::make_unique_for_overwrite<std::byte[]>(bytes);
  const std::span<std::byte> own(storage.get(), bytes);
  auto size = encode(round, ctx, grad, stream, own);
  if (!size.ok()) return size.status();
  auto header = peek_frame_header(own);  // our own frame: no checksum to verify
  if (!header.ok()) return header.status();
  const FrameView own_frame{*header, own.subspan(kFrameHeaderBytes, *size - kFrameHeaderBytes)};
  return add_frames(own_frame, other, out);
}

Status Codec::decode(const FrameView& frame, const Stream* stream, std::span<float> out) const {
  std::fill(out.begin(), out.end(), 0.0f);
  return decode_accumulate(frame, stream, out);
}

}  // namespace gradgate::kernels
