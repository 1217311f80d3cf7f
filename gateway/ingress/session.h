// One connected worker as the ingress server's thread sees it. Touched only by that thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <unordered_set>

#include "gateway/ingress/cuda_buffers.h"
#include "gateway/ingress/ingress.h"
#include "gradgate/ingress_protocol.h"

namespace gradgate::gateway {

struct Session {
  uint64_t id = 0;  // unique for the server's lifetime; completions find their session by it
  int fd = -1;
  bool joined = false;  // HELLO was accepted: on_worker_left is owed when the session ends
  uint32_t local_rank = 0;
  /// The client's protocol version, from its messages: replies are written in it.
  uint16_t version = ingress_protocol::kVersion;
  /// By the key the handler gave: the buffer of each tensor it declared, host or GPU; declaring
  /// a tensor again (DDP reallocates its buckets) replaces it.
  std::map<uint32_t, WorkerBuffer> buffers;
  CudaAllocations cuda_allocations;        // the GPU allocations those buffers opened
  std::unordered_set<uint32_t> in_flight;  // keys with an all-reduce not yet completed
};

}  // namespace gradgate::gateway
