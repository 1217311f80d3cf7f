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

// gg_codec numbers the codecs as the table does (client/src/codec_name.cc checks it).
gg_codec to_client_codec(CodecId codec) {
  const auto id = static_cast<unsigned>(codec);
  return is_codec_id(id) ? static_cast<gg_codec>(id) : GG_CODEC_UNKNOWN;
}

}  // namespace gradgate::gateway
