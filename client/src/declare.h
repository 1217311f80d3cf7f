// What gg_declare and gg_declare_cuda share: checking their common arguments, and declaring a name
// to the gateway once per client.
#pragma once

#include <optional>
#include <string>

#include "client_state.h"
#include "gradgate/ingress_protocol.h"

namespace gradgate::client_impl {

/// Checks the arguments both declare calls take (clears *out first) and fills `spec`; `dtype` is
/// the caller's gg_dtype as c_enum_value reads it. Returns GG_OK, or GG_INVALID_ARGUMENT with the
/// thread's error prefixed by `what`.
gg_status make_declare_spec(gg_client* client, const char* name, uint64_t elements, int dtype,
                            uint64_t rows, uint64_t cols, double data_volume, gg_tensor** out,
                            const std::string& what, ingress_protocol::Declare& spec);

/// Declares `spec` to the gateway with a new shared buffer (`device` empty) or over the process's
/// GPU memory `device`, and sets *out to a handle of it. A name this client declared before gives
/// a fresh handle to that tensor if its size, dtype and memory are the same, GG_INVALID_ARGUMENT
/// otherwise.
gg_status declare(gg_client& client, const std::string& what, const ingress_protocol::Declare& spec,
                  const std::optional<ingress_protocol::CudaBuffer>& device, gg_tensor** out);

}  // namespace gradgate::client_impl
