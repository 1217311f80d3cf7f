// gg_declare_cuda: a tensor in the process's GPU memory, which the gateway maps through CUDA IPC.
// The library only passes the handles on; it never calls CUDA.
#include <cstdint>
#include <cstring>
#include <optional>

#include "c_enum.h"
#include "declare.h"
#include "error.h"
#include "gradgate/ingress_protocol.h"

namespace proto = gradgate::ingress_protocol;
using gradgate::client_impl::fail;

extern "C" gg_status gg_declare_cuda(gg_client* client, const char* name, uint64_t elements,
                                     gg_dtype dtype, uint64_t rows, uint64_t cols,
                                     double data_volume, const gg_cuda_buffer* buffer,
                                     gg_tensor** out) {
  const std::string what = "gg_declare_cuda(" + gradgate::client_impl::quoted(name) + ")";
  proto::Declare spec;
  const gg_status checked = gradgate::client_impl::make_declare_spec(
      client, name, elements, gradgate::client_impl::c_enum_value(dtype), rows, cols, data_volume,
      out, what, spec);
  if (checked != GG_OK) return checked;
  if (buffer == nullptr) return fail(GG_INVALID_ARGUMENT, what + ": null buffer");
  const uint64_t bytes = elements * proto::wire_dtype_bytes(spec.dtype);
  if (buffer->offset > UINT64_MAX - bytes) {
    return fail(GG_INVALID_ARGUMENT, what + ": offset " + std::to_string(buffer->offset) +
                                         " plus the tensor's " + std::to_string(bytes) +
                                         " bytes overflows");
  }
  static_assert(sizeof buffer->device_uuid == sizeof(proto::CudaBuffer{}.device_uuid));
  static_assert(sizeof buffer->memory_handle == sizeof(proto::CudaBuffer{}.memory_handle));
  static_assert(sizeof buffer->ready_event_handle ==
                sizeof(proto::CudaBuffer{}.ready_event_handle));
  proto::CudaBuffer device;
  std::memcpy(device.device_uuid.data(), buffer->device_uuid, sizeof buffer->device_uuid);
  std::memcpy(device.memory_handle.data(), buffer->memory_handle, sizeof buffer->memory_handle);
  device.offset = buffer->offset;
  std::memcpy(device.ready_event_handle.data(), buffer->ready_event_handle,
              sizeof buffer->ready_event_handle);
  return gradgate::client_impl::declare(*client, what, spec, device, out);
}
