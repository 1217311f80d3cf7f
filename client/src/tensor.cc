// gg_declare, the declaring that gg_declare_cuda shares with it, and the accessors of a tensor's
// buffer.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "c_enum.h"
#include "client_state.h"
#include "declare.h"
#include "error.h"
#include "gradgate/ingress_protocol.h"

namespace proto = gradgate::ingress_protocol;
using gradgate::client_impl::fail;
using gradgate::client_impl::SharedBuffer;

namespace {

/// A memfd of `bytes` bytes mapped shared; the reason in `error` when it cannot be made.
std::shared_ptr<SharedBuffer> create_buffer(const proto::Declare& spec, size_t bytes,
                                            std::string& error) {
  auto buffer = std::make_shared<SharedBuffer>();
  buffer->name = spec.name;
  buffer->elements = spec.elements;
  buffer->dtype = static_cast<gg_dtype>(spec.dtype);
  buffer->fd = memfd_create("gradgate-tensor", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (buffer->fd < 0) {
    error = std::string("memfd_create: ") + std::strerror(errno);
    return nullptr;
  }
  if (ftruncate(buffer->fd, static_cast<off_t>(bytes)) != 0) {
    error = "ftruncate to " + std::to_string(bytes) + " bytes: " + std::strerror(errno);
    return nullptr;
  }
  // The gateway maps the buffer too: sealed at its size, it can never shrink under the gateway's
  // feet (which would kill the gateway with SIGBUS).
  if (fcntl(buffer->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
    error = std::string("sealing the buffer: ") + std::strerror(errno);
    return nullptr;
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, buffer->fd, 0);
  if (data == MAP_FAILED) {
    error = "mmap of " + std::to_string(bytes) + " bytes: " + std::strerror(errno);
    return nullptr;
  }
  buffer->data = data;
  buffer->bytes = bytes;
  return buffer;
}

/// The handle of `buffer`, made on its first declaration. Declaring a name again returns the
/// same one: handles live until gg_close, so a fresh one per call would pile up.
gg_tensor* handle_of(gg_client& client, const std::shared_ptr<SharedBuffer>& buffer) {
  std::lock_guard lock(client.mu);
  if (buffer->handle == nullptr) {
    client.tensors.push_back(std::make_unique<gg_tensor>(gg_tensor{&client, buffer}));
    buffer->handle = client.tensors.back().get();
  }
  return buffer->handle;
}

/// Why an earlier declaration of the name cannot be followed by this one ("" if it can).
std::string redeclare_error(const SharedBuffer& existing, const proto::Declare& spec,
                            const std::optional<proto::CudaBuffer>& device) {
  if (existing.elements != spec.elements || existing.dtype != static_cast<gg_dtype>(spec.dtype)) {
    return "already declared with " + std::to_string(existing.elements) + " elements of dtype " +
           std::to_string(existing.dtype) + ", now " + std::to_string(spec.elements) +
           " of dtype " + std::to_string(spec.dtype);
  }
  if (existing.device.has_value() != device.has_value()) {
    return existing.device ? "already declared over GPU memory (gg_declare_cuda)"
                           : "already declared with a shared buffer (gg_declare)";
  }
  return "";
}

}  // namespace

namespace gradgate::client_impl {

gg_status make_declare_spec(gg_client* client, const char* name, uint64_t elements, int dtype,
                            uint64_t rows, uint64_t cols, double data_volume, gg_tensor** out,
                            const std::string& what, proto::Declare& spec) {
  if (out == nullptr) return fail(GG_INVALID_ARGUMENT, what + ": null output pointer");
  *out = nullptr;
  if (client == nullptr) return fail(GG_INVALID_ARGUMENT, what + ": null client");
  if (name == nullptr) return fail(GG_INVALID_ARGUMENT, what + ": null name");
  if (dtype != GG_FP32 && dtype != GG_FP16 && dtype != GG_BF16) {
    return fail(GG_INVALID_ARGUMENT, what + ": unknown dtype " + std::to_string(dtype));
  }
  spec.name = name;
  spec.elements = elements;
  spec.dtype = static_cast<uint8_t>(dtype);
  spec.rows = rows;
  spec.cols = cols;
  spec.data_volume = data_volume;
  if (const std::string error = proto::check_declare(spec); !error.empty()) {
    return fail(GG_INVALID_ARGUMENT, what + ": " + error);
  }
  return GG_OK;
}

gg_status declare(gg_client& client, const std::string& what, const proto::Declare& spec,
                  const std::optional<proto::CudaBuffer>& device, gg_tensor** out) {
  const size_t bytes = spec.elements * proto::wire_dtype_bytes(spec.dtype);
  std::lock_guard declare_lock(client.declare_mu);
  std::shared_ptr<SharedBuffer> existing;
  {
    std::lock_guard lock(client.mu);
    if (client.broken) return fail(GG_CLOSED, what + ": " + client.broken_reason);
    if (auto it = client.buffers.find(spec.name); it != client.buffers.end()) {
      existing = it->second;
    }
  }
  if (existing) {
    if (const std::string error = redeclare_error(*existing, spec, device); !error.empty()) {
      return fail(GG_INVALID_ARGUMENT, what + ": " + error);
    }
    // The same buffer: its handle. Another GPU buffer (the memory moved): declared anew, the
    // gateway then uses it under the same key, but not while an all-reduce of it runs.
    if (existing->device == device) {
      *out = handle_of(client, existing);
      return GG_OK;
    }
    std::lock_guard lock(client.mu);
    if (existing->in_flight) {
      return fail(GG_INVALID_ARGUMENT,
                  what + ": cannot move to another buffer while its all-reduce runs");
    }
  }

  std::shared_ptr<SharedBuffer> buffer;
  if (device) {
    buffer = std::make_shared<SharedBuffer>();
    buffer->name = spec.name;
    buffer->elements = spec.elements;
    buffer->dtype = static_cast<gg_dtype>(spec.dtype);
    buffer->bytes = bytes;
    buffer->device = device;
  } else {
    std::string error;
    buffer = create_buffer(spec, bytes, error);
    if (!buffer) return fail(GG_INTERNAL, what + ": " + error);
  }
  uint64_t id = 0;
  std::shared_ptr<Reply> reply;
  {
    std::lock_guard lock(client.mu);
    std::tie(id, reply) = add_pending(client);
  }
  const auto packet =
      device ? proto::encode(id, proto::DeclareCuda{spec, *device}) : proto::encode(id, spec);
  const gg_status status =
      round_trip(client, id, reply, packet, buffer->fd, kControlTimeoutMs, what);
  // The gateway holds its own descriptor now (or never will): the mapping keeps the memory, and
  // a descriptor kept per tensor would count against the process's open-file limit.
  buffer->close_fd();
  if (status != GG_OK) return status;
  buffer->key = reply->key;
  {
    std::lock_guard lock(client.mu);
    client.buffers.insert_or_assign(spec.name, buffer);
  }
  *out = handle_of(client, buffer);
  return GG_OK;
}

}  // namespace gradgate::client_impl

extern "C" gg_status gg_declare(gg_client* client, const char* name, uint64_t elements,
                                gg_dtype dtype, uint64_t rows, uint64_t cols, double data_volume,
                                gg_tensor** out) {
  const std::string what = "gg_declare(" + gradgate::client_impl::quoted(name) + ")";
  proto::Declare spec;
  const gg_status checked = gradgate::client_impl::make_declare_spec(
      client, name, elements, gradgate::client_impl::c_enum_value(dtype), rows, cols, data_volume,
      out, what, spec);
  if (checked != GG_OK) return checked;
  return gradgate::client_impl::declare(*client, what, spec, std::nullopt, out);
}

extern "C" gg_status gg_release(gg_tensor* tensor) {
  if (tensor == nullptr) return fail(GG_INVALID_ARGUMENT, "gg_release: null tensor");
  gg_client& client = *tensor->client;
  const std::shared_ptr<SharedBuffer> buffer = tensor->buffer;
  const std::string what = "gg_release(\"" + buffer->name + "\")";
  std::lock_guard declare_lock(client.declare_mu);
  uint64_t id = 0;
  std::shared_ptr<gradgate::client_impl::Reply> reply;
  {
    std::lock_guard lock(client.mu);
    if (client.broken) return fail(GG_CLOSED, what + ": " + client.broken_reason);
    if (buffer->released) return fail(GG_INVALID_ARGUMENT, what + ": already released");
    if (buffer->in_flight) {
      return fail(GG_INVALID_ARGUMENT, what + ": the tensor has an all-reduce in flight");
    }
    std::tie(id, reply) = gradgate::client_impl::add_pending(client);
  }
  const auto packet = proto::encode(id, proto::Release{buffer->key});
  const gg_status status = gradgate::client_impl::round_trip(
      client, id, reply, packet, -1, gradgate::client_impl::kControlTimeoutMs, what);
  if (status != GG_OK) return status;
  std::lock_guard lock(client.mu);
  buffer->released = true;
  buffer->unmap();
  if (auto it = client.buffers.find(buffer->name);
      it != client.buffers.end() && it->second == buffer) {
    client.buffers.erase(it);
  }
  return GG_OK;
}

extern "C" void* gg_tensor_data(gg_tensor* tensor) {
  return tensor == nullptr ? nullptr : tensor->buffer->data;
}

extern "C" size_t gg_tensor_bytes(const gg_tensor* tensor) {
  return tensor == nullptr ? 0 : tensor->buffer->bytes;
}
