// Who takes part in a job, as one gateway sees it: what the core, its codecs and its collective
// are made for.
#pragma once

#include <cstdint>

namespace gradgate::gateway {

struct JobShape {
  uint64_t id = 0;
  uint32_t nodes = 1;          // the job's gateways, one per node
  uint32_t node_rank = 0;      // this gateway's rank among them
  uint32_t local_workers = 1;  // the job's training processes on this node
};

}  // namespace gradgate::gateway
