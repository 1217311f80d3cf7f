#include "gateway/ingress/status_mapping.h"

#include "gradgate/ingress_protocol.h"

namespace gradgate::gateway {

gg_status to_client_status(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return GG_OK;
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kNotFound:
    case ErrorCode::kIncompatible:
    case ErrorCode::kUnsupported:
      return GG_REJECTED;
    case ErrorCode::kResourceExhausted:
      return GG_RESOURCE_EXHAUSTED;
    case ErrorCode::kTimeout:
    case ErrorCode::kUnavailable:
    case ErrorCode::kAborted:
    case ErrorCode::kMalformedFrame:
    case ErrorCode::kChecksumMismatch:
      return GG_PEER_FAILED;
    case ErrorCode::kInternal:
      return GG_INTERNAL;
    case ErrorCode::kNonFiniteGradient:
      return GG_NONFINITE_GRADIENT;
  }
  return GG_INTERNAL;
}

gg_status hello_refusal(ErrorCode code, uint16_t client_version) {
  if (code == ErrorCode::kAborted) return GG_CLOSED;
  if (code != ErrorCode::kUnavailable) return to_client_status(code);
  return client_version >= ingress_protocol::kFirstVersionWithRankInUse ? GG_RANK_IN_USE
                                                                        : GG_REJECTED;
}

// gg_codec numbers the codecs as the wire frame does.
static_assert(GG_CODEC_NONE == static_cast<int>(kernels::CodecId::kNone) &&
              GG_CODEC_FP16 == static_cast<int>(kernels::CodecId::kFp16) &&
              GG_CODEC_BF16 == static_cast<int>(kernels::CodecId::kBf16) &&
              GG_CODEC_QSGD == static_cast<int>(kernels::CodecId::kQsgd) &&
              GG_CODEC_SIGN == static_cast<int>(kernels::CodecId::kSign) &&
              GG_CODEC_TOPK == static_cast<int>(kernels::CodecId::kTopk) &&
              GG_CODEC_RANDOMK == static_cast<int>(kernels::CodecId::kRandomk) &&
              GG_CODEC_POWERSGD == static_cast<int>(kernels::CodecId::kPowersgd));
static_assert(kernels::kCodecCount == GG_CODEC_POWERSGD + 1, "a codec that gg_codec lacks");

gg_codec to_client_codec(kernels::CodecId codec) {
  const int id = static_cast<int>(codec);
  return id < kernels::kCodecCount ? static_cast<gg_codec>(id) : GG_CODEC_UNKNOWN;
}

}  // namespace gradgate::gateway
