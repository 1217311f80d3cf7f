#include "gradgate/kernels/codec.h"

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

}  // namespace gradgate::kernels
