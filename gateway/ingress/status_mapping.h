// How the gateway's error codes reach a worker: each ErrorCode becomes the gg_status that the C API
// documents, so that a training process can tell its own mistakes (GG_REJECTED) from a failure
// elsewhere in the job (GG_PEER_FAILED) or a limit of the gateway (GG_RESOURCE_EXHAUSTED).
//
//   kOk                                         -> GG_OK
//   kInvalidArgument, kNotFound, kIncompatible,
//   kUnsupported                                -> GG_REJECTED
//   kResourceExhausted                          -> GG_RESOURCE_EXHAUSTED
//   kTimeout, kUnavailable, kAborted,
//   kMalformedFrame, kChecksumMismatch          -> GG_PEER_FAILED
//   kInternal                                   -> GG_INTERNAL
//   kNonFiniteGradient (on every node of the job) -> GG_NONFINITE_GRADIENT
//
// Two exceptions, hello_refusal: a HELLO refused with kUnavailable (the local rank is held by
// another connection) is GG_RANK_IN_USE, which gg_connect_wait waits out, for clients that know
// that status; one refused with kAborted (the gateway is not serving yet: joining_handler.h) is
// GG_CLOSED, which gg_connect_wait waits out (clients of protocol version 4 and later).
//
// The codec a step ran with reaches the worker as the gg_codec of the same wire id.
#pragma once

#include <cstdint>

#include "gradgate/base/status.h"
#include "gradgate/client.h"
#include "gradgate/kernels/frame.h"

namespace gradgate::gateway {

/// The gg_status a worker sees for an error of the gateway.
gg_status to_client_status(ErrorCode code);

/// The gg_status of a HELLO refused with `code`, for a client of protocol version
/// `client_version` (older clients get GG_REJECTED for a rank in use).
gg_status hello_refusal(ErrorCode code, uint16_t client_version);

/// The gg_codec a worker sees for the codec a step ran with.
gg_codec to_client_codec(CodecId codec);

}  // namespace gradgate::gateway
