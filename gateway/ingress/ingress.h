// The gateway's side of libgradgate: local workers connect over a Unix socket, declare tensors
// whose buffers they share with the gateway (a memfd passed over the socket, mapped by both, or
// the worker's GPU memory opened through CUDA IPC), and request all-reduces. The ingress server
// owns the sessions and mappings; the gateway core sees only the calls below.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "gradgate/base/dtype.h"
#include "gradgate/base/status.h"
#include "gradgate/kernels/codec.h"

namespace gradgate::gateway {

/// A tensor as a worker declares it.
struct TensorSpec {
  std::string name;  // the same on every worker of the job
  uint64_t elements = 0;
  Dtype dtype = Dtype::kFp32;
  uint64_t rows = 0, cols = 0;  // 2-D shape for low-rank codecs, 0 x 0 if none
  double data_volume = 0.0;     // samples this worker trains on, 0 if unknown
};

/// A worker's buffer for one tensor, mapped in the gateway: shared memory on the host, or GPU
/// memory the worker shares through CUDA IPC. The mapping stays valid while any copy of the
/// WorkerBuffer exists, even after the worker left: an all-reduce that works in the buffer may
/// finish writing to it.
struct WorkerBuffer {
  std::byte* data = nullptr;  // a host address, or a device address of `cuda_device`
  size_t bytes = 0;           // elements * dtype_bytes
  std::shared_ptr<const void> mapping;
  kernels::MemoryKind memory = kernels::MemoryKind::kHost;
  /// kDevice: the gateway's ordinal of the GPU that holds the buffer.
  int cuda_device = -1;
  /// kDevice: a cudaEvent_t (opened from the worker's IPC event handle, owned by `mapping`) that
  /// the worker records once its gradient is in the buffer, before each all-reduce: the gateway
  /// waits for it before it reads.
  void* ready_event = nullptr;
};

/// How an all-reduce ended, as the worker sees it.
struct AllreduceOutcome {
  Status status;
  uint64_t step = 0;
  uint64_t raw_bytes = 0;
  uint64_t wire_bytes = 0;
  double encode_seconds = 0.0;
  double communicate_seconds = 0.0;
  double decode_seconds = 0.0;
  /// The codec the step ran with: a worker's momentum correction treats the result of a sparse
  /// one (top-k, random-k) differently.
  CodecId codec = CodecId::kNone;
};

/// What the gateway tells a worker when it connects.
struct JobInfo {
  uint32_t node_rank = 0;
  uint32_t nodes = 1;
  uint32_t local_workers = 1;
  uint32_t world_size = 1;
  /// collective.timeout_ms: a worker's own limit on an all-reduce should outlast it, so that the
  /// gateway's failure (which says why) arrives first.
  uint32_t collective_timeout_ms = 30000;
};

/// Implemented by the gateway core. Calls come from the ingress server's thread; they must not
/// block for long (an all-reduce completes later, through `done`).
class IngressHandler {
 public:
  virtual ~IngressHandler() = default;

  /// A worker introduces itself. An error is sent back and the session closed: kUnavailable when
  /// another session holds the local rank (the worker gets GG_RANK_IN_USE and may try again once
  /// that session has left), kAborted while the gateway is not serving yet (GG_CLOSED: try
  /// again), any other code for a rank that can never join (out of range).
  virtual Result<JobInfo> on_worker_joined(uint32_t local_rank) = 0;
  /// A worker declares a tensor with its mapped buffer. Returns the key the worker then uses. A
  /// worker may declare a tensor again with another buffer of the same size (its memory moved):
  /// the next all-reduce uses that one.
  virtual Result<uint32_t> on_declare(uint32_t local_rank, const TensorSpec& spec,
                                      WorkerBuffer buffer) = 0;
  /// A worker asks for the all-reduce of its buffer of tensor `key`. `done` is called exactly
  /// once, from any thread, when the sum is in the buffer or the all-reduce failed.
  virtual void on_allreduce(uint32_t local_rank, uint32_t key,
                            std::function<void(AllreduceOutcome)> done) = 0;
  /// A worker is done with tensor `key` (it has no all-reduce of it in flight). When this
  /// returns, the core no longer touches that buffer; a tensor no worker holds any more is
  /// dropped with its state. The other workers' steps of it can no longer complete: they fail.
  virtual void on_release(uint32_t local_rank, uint32_t key) = 0;
  /// A worker disconnected or died. When this returns, the core no longer touches its buffers
  /// (the server unmaps them) and has failed or detached its pending all-reduces.
  virtual void on_worker_left(uint32_t local_rank) = 0;
};

/// Counters of the ingress server, for metrics.
struct IngressStats {
  uint64_t sessions_opened = 0;
  uint64_t sessions_closed = 0;
  uint64_t protocol_errors = 0;  // malformed messages: the session is closed
  /// Connections closed at once, and declarations refused, because the gateway was out of file
  /// descriptors.
  uint64_t connections_refused = 0;
  /// HELLOs refused: a local rank beyond the node's workers, or one another session holds.
  uint64_t workers_refused = 0;
  /// Well-formed declarations refused: over the residual memory cap, a spec that conflicts with
  /// the tensor's, GPU memory the gateway cannot map. The worker is told why; its session goes on.
  uint64_t declarations_refused = 0;
  uint64_t mapped_bytes = 0;   // gauge: shared memory mapped now
  uint64_t cuda_mappings = 0;  // gauge: workers' GPU allocations open through CUDA IPC now
};

class IngressServer {
 public:
  virtual ~IngressServer() = default;
  /// Binds the socket (replacing a stale socket file) and starts serving on its own thread.
  virtual Status start(IngressHandler& handler) = 0;
  /// Closes every session (calling on_worker_left for each) and the socket. Idempotent.
  virtual void stop() = 0;
  virtual IngressStats stats() const = 0;
};

/// The Unix-socket implementation (SOCK_SEQPACKET, memfd buffers over SCM_RIGHTS, GPU buffers
/// through CUDA IPC where this build and machine can open them).
std::unique_ptr<IngressServer> make_unix_ingress_server(const std::string& socket_path);

}  // namespace gradgate::gateway
