// What lies behind the opaque handles of the C API: the connection with its reader thread, the
// shared buffers of declared tensors, and the requests waiting for the gateway's replies.
//
// Locking: gg_client::mu guards every mutable field of the client, its buffers' `in_flight` and
// `codec`, and every Reply; gg_client::cv is notified whenever a reply completes or the connection
// breaks.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "exported_api.h"
#include "gradgate/ingress_protocol.h"

namespace gradgate::client_impl {

/// One tensor's memfd, mapped here and in the gateway, or (`device` set) the process's GPU memory
/// that the gateway maps through CUDA IPC. Unmapped and closed when the last handle that shares it
/// goes.
struct SharedBuffer {
  std::string name;
  uint64_t elements = 0;
  gg_dtype dtype = GG_FP32;
  uint32_t key = 0;  // the gateway's key, from DECLARE_OK
  int fd = -1;       // the memfd until it was sent to the gateway; -1 after
  void* data = nullptr;
  size_t bytes = 0;
  std::optional<ingress_protocol::CudaBuffer> device;
  bool in_flight = false;             // an all-reduce was sent and its reply has not come
  gg_tensor* handle = nullptr;        // the one handle of this buffer, owned by the client
  bool released = false;              // gg_release: the gateway dropped it, the memory is unmapped
  gg_codec codec = GG_CODEC_UNKNOWN;  // that of the latest successful gg_wait

  SharedBuffer() = default;
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;
  ~SharedBuffer();
  /// Closes the memfd's descriptor (once the gateway got its own); the mapping stays.
  void close_fd();
  /// Unmaps the shared memory (data becomes null).
  void unmap();
};

/// The gateway's answer to one request, filled by the reader thread.
struct Reply {
  bool done = false;
  gg_status status = GG_OK;
  std::string message;  // the gateway's message, or why the connection broke
  gg_job_info job{};
  uint32_t collective_timeout_ms = 0;
  uint32_t key = 0;
  gg_allreduce_info info{};
  gg_codec codec = GG_CODEC_UNKNOWN;     // an all-reduce's, for its buffer once waited for
  std::shared_ptr<SharedBuffer> buffer;  // an all-reduce's buffer, released when it completes
};

}  // namespace gradgate::client_impl

struct gg_tensor {
  gg_client* client = nullptr;
  std::shared_ptr<gradgate::client_impl::SharedBuffer> buffer;
};

struct gg_request {
  gg_client* client = nullptr;
  std::string what;  // "gg_wait(\"bucket0\")", for messages
  std::shared_ptr<gradgate::client_impl::Reply> reply;
  std::shared_ptr<gradgate::client_impl::SharedBuffer> buffer;  // gets the codec of a GG_OK wait
};

struct gg_client {
  std::string socket_path;
  uint32_t local_rank = 0;
  int fd = -1;
  gg_job_info job{};
  uint32_t collective_timeout_ms = 0;  // the gateway's, from HELLO_OK
  std::thread reader;

  std::mutex mu;
  std::condition_variable cv;
  uint64_t next_request_id = 1;
  std::unordered_map<uint64_t, std::shared_ptr<gradgate::client_impl::Reply>> pending;
  bool broken = false;  // the connection is gone: every call returns GG_CLOSED
  std::string broken_reason;
  bool closing = false;   // gg_close runs: waiters return at once
  int waiters = 0;        // threads inside gg_wait
  std::mutex declare_mu;  // serialises gg_declare, so a name is declared to the gateway once
  std::map<std::string, std::shared_ptr<gradgate::client_impl::SharedBuffer>> buffers;
  std::vector<std::unique_ptr<gg_tensor>> tensors;
  std::unordered_map<gg_request*, std::unique_ptr<gg_request>> requests;
};

namespace gradgate::client_impl {

/// How long a control request (hello, declare) may wait for the gateway's reply.
inline constexpr int kControlTimeoutMs = 30000;

/// Registers a reply slot under a fresh request id (caller holds client.mu).
std::pair<uint64_t, std::shared_ptr<Reply>> add_pending(gg_client& client);

/// Sends a packet, with `pass_fd` when >= 0. On failure marks the connection broken and returns
/// the reason; "" on success.
std::string send_to_gateway(gg_client& client, std::span<const std::byte> packet, int pass_fd);

/// Sends a control request and waits for its reply up to `timeout_ms`. Returns GG_OK with the
/// reply filled, or the failure with its message prefixed by `what`, as the thread's error.
gg_status round_trip(gg_client& client, uint64_t request_id, const std::shared_ptr<Reply>& reply,
                     std::span<const std::byte> packet, int pass_fd, int timeout_ms,
                     const std::string& what);

/// Receives the gateway's replies until the connection ends; runs on client.reader.
void read_replies(gg_client* client);

/// Stops the reader, fails what is pending with GG_CLOSED, waits for the threads in gg_wait to
/// leave, and frees the client with all its tensors and requests.
void destroy(gg_client* client);

}  // namespace gradgate::client_impl
