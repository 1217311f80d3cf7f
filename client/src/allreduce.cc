// gg_allreduce and gg_wait: starting an all-reduce and waiting for the gateway's reply;
// gg_tensor_codec: the codec named by the reply of its latest successful wait.
#include <chrono>

#include "client_state.h"
#include "error.h"
#include "gradgate/ingress_protocol.h"

namespace proto = gradgate::ingress_protocol;
using gradgate::client_impl::fail;

extern "C" gg_status gg_allreduce(gg_tensor* tensor, gg_request** out) {
  if (out == nullptr) return fail(GG_INVALID_ARGUMENT, "gg_allreduce: null output pointer");
  *out = nullptr;
  if (tensor == nullptr) return fail(GG_INVALID_ARGUMENT, "gg_allreduce: null tensor");
  gg_client& client = *tensor->client;
  auto& buffer = tensor->buffer;
  const std::string what = "gg_allreduce(\"" + buffer->name + "\")";

  auto request = std::make_unique<gg_request>();
  request->client = &client;
  request->what = "gg_wait(\"" + buffer->name + "\")";
  uint64_t id = 0;
  {
    std::lock_guard lock(client.mu);
    if (client.broken) return fail(GG_CLOSED, what + ": " + client.broken_reason);
    if (buffer->released) return fail(GG_INVALID_ARGUMENT, what + ": the tensor was released");
    if (buffer->in_flight) {
      return fail(GG_INVALID_ARGUMENT, what + ": the tensor already has an all-reduce in flight");
    }
    std::tie(id, request->reply) = gradgate::client_impl::add_pending(client);
    request->reply->buffer = buffer;
    request->buffer = buffer;
    buffer->in_flight = true;
  }
  const auto packet = proto::encode(id, proto::Allreduce{buffer->key});
  if (const std::string reason = gradgate::client_impl::send_to_gateway(client, packet, -1);
      !reason.empty()) {
    return fail(GG_CLOSED, what + ": " + reason);  // the broken connection released the buffer
  }
  std::lock_guard lock(client.mu);
  gg_request* handle = request.get();
  client.requests.emplace(handle, std::move(request));
  *out = handle;
  return GG_OK;
}

extern "C" gg_status gg_wait(gg_request* request, int64_t timeout_ms, gg_allreduce_info* info) {
  if (request == nullptr) return fail(GG_INVALID_ARGUMENT, "gg_wait: null request");
  gg_client& client = *request->client;
  std::unique_lock lock(client.mu);
  auto finished = [&] { return request->reply->done || client.closing; };
  ++client.waiters;
  bool ready = true;
  // Beyond a year the deadline could overflow the clock: treat it as no limit.
  constexpr int64_t kYearMs = int64_t{365} * 24 * 3600 * 1000;
  if (timeout_ms < 0 || timeout_ms > kYearMs) {
    client.cv.wait(lock, finished);
  } else {
    ready = client.cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), finished);
  }
  --client.waiters;
  if (client.closing) {
    client.cv.notify_all();
    return fail(GG_CLOSED, request->what + ": the client was closed");
  }
  if (!ready) {
    return fail(GG_TIMEOUT, request->what + ": the all-reduce did not finish within " +
                                std::to_string(timeout_ms) + " ms; it is still running");
  }
  const gradgate::client_impl::Reply reply = *request->reply;
  const std::string what = request->what;
  if (reply.status == GG_OK) request->buffer->codec = reply.codec;
  client.requests.erase(request);
  if (reply.status != GG_OK) {
    if (reply.status == GG_CLOSED) return fail(GG_CLOSED, what + ": " + reply.message);
    return fail(reply.status,
                what + ": gateway answered " + gg_status_name(reply.status) + ": " + reply.message);
  }
  if (info != nullptr) *info = reply.info;
  return GG_OK;
}

extern "C" gg_status gg_tensor_codec(const gg_tensor* tensor, gg_codec* out) {
  if (out == nullptr) return fail(GG_INVALID_ARGUMENT, "gg_tensor_codec: null output pointer");
  if (tensor == nullptr) return fail(GG_INVALID_ARGUMENT, "gg_tensor_codec: null tensor");
  std::lock_guard lock(tensor->client->mu);
  *out = tensor->buffer->codec;
  return GG_OK;
}
