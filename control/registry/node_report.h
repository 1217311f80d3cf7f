// What a gateway reports to the controller (POST /v1/nodes, docs/control.md): who it is, where it
// can be reached, how far it is, and what it measured since its last report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control/policy/policy.h"

namespace gradgate::control {

/// The link from `peer` to the reporting node, measured on arrival at the reporting node.
struct LinkReport {
  uint32_t peer = 0;
  double goodput_bytes_per_second = 0.0;  // > 0
  double rtt_seconds = 0.0;               // >= 0
  double age_seconds = 0.0;               // how old the measurement is, >= 0
};

/// How much data one training process of the node has processed (any unit, >= 0).
struct WorkerReport {
  uint32_t local_rank = 0;
  double data_volume = 0.0;
};

/// Per-step averages over the last report interval, in seconds.
struct StepTimings {
  uint64_t steps = 0;
  double compute_seconds = 0.0;
  double encode_seconds = 0.0;
  double communicate_seconds = 0.0;
  double decode_seconds = 0.0;
};

struct NodeReport {
  uint64_t job_id = 0;
  uint32_t node = 0;            // < nodes
  uint32_t nodes = 1;           // gateways in the job
  std::string address;          // transport host:port
  std::string admin;            // admin HTTP host:port, may be empty
  uint64_t step = 0;            // steps done (the largest over the node's tensors)
  uint64_t policy_version = 0;  // the version the node applies
  /// The newest version the node holds (received; it applies it from its effective step on).
  uint64_t received_policy_version = 0;
  bool fail_static = false;  // the node lost the controller and keeps its last policy
  std::vector<LinkReport> links;
  std::vector<WorkerReport> workers;
  std::vector<TensorSample> tensors;
  std::vector<CodecSpeed> codec_speeds;
  StepTimings timings;
};

}  // namespace gradgate::control
