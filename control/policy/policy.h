// The policy engine's interface: from the measurements of a job (link bandwidths, data volume per
// gateway, tensor sizes, codec speeds) to a codec spec per tensor per gateway.
//
// A policy is a pure function of its settings and the measurements: no I/O, no threads, no clock.
// decide() may be called from any thread. Versioning (a counter bumped when the decision changes
// and the step at which it takes effect) belongs to the controller that calls it.
//
// Policies (docs/policies.md has the formulas):
//   static     default_codec for every tensor;
//   bandwidth  the mildest ladder entry whose predicted communicate time meets the target, turned
//              off per tensor where encode + decode costs more time than it saves on the wire;
//   dagc-r     bandwidth, then per-gateway top-k densities proportional to data volume under the
//              same total (exact clipped allocation);
//   dagc-a     the same with the one-pass approximate allocation.
// Every policy keeps tensors dense during warm-up and below min_compress_elements, and applies the
// layer rules last.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gradgate/base/dtype.h"
#include "gradgate/base/status.h"

namespace gradgate::control {

/// Measured goodput of the link from one gateway to another.
struct LinkSample {
  uint32_t from_node = 0;
  uint32_t to_node = 0;
  double goodput_bytes_per_second = 0.0;  // > 0
  double rtt_seconds = 0.0;               // >= 0; not used by the cost model yet
};

/// Measured speed of a codec, in bytes of raw fp32 input per second.
struct CodecSpeed {
  std::string codec = {};  // codec name: "topk", "fp16", ...
  double encode_bytes_per_second = 0.0;
  double decode_bytes_per_second = 0.0;
};

/// A tensor the job all-reduces every step.
struct TensorSample {
  std::string name = {};
  uint64_t elements = 0;
  /// Optional 2-D shape (rows * cols == elements), used by powersgd's size; 0 means 1-D.
  uint64_t rows = 0;
  uint64_t cols = 0;
  /// The workers' dtype: DDP would send 2 bytes per element of a 16-bit tensor, and the gateway
  /// sends a 16-bit tensor's codec none in that dtype.
  Dtype dtype = Dtype::kFp32;
};

/// How much training data a gateway's workers process (any unit, the same for every gateway).
struct NodeSample {
  uint32_t node = 0;
  double data_volume = 0.0;  // > 0
};

/// The most codecs (nodes x tensors) a job's decision may hold: one per node and tensor, so a job
/// of 65536 nodes may have 64 tensors, one of 1024 nodes 4096.
inline constexpr uint64_t kMaxPolicyCodecs = uint64_t{1} << 22;

struct Measurements {
  uint64_t step = 0;   // the step the decision is for
  uint32_t nodes = 0;  // gateways in the job, numbered 0..nodes-1
  std::vector<NodeSample> node_samples = {};
  std::vector<LinkSample> links = {};
  std::vector<TensorSample> tensors = {};
  std::vector<CodecSpeed> codec_speeds = {};
};

/// A per-layer rule, for the tensors whose name matches `glob` (fnmatch syntax). The first
/// matching rule applies, after the policy's own choice.
struct LayerRule {
  std::string glob = {};
  std::optional<std::string> codec = {};   // forces this codec spec
  std::optional<double> min_density = {};  // clamp topk/randomk densities into [min, max]
  std::optional<double> max_density = {};
};

struct PolicySettings {
  std::string name = "static";  // static | bandwidth | dagc-r | dagc-a
  /// static: the codec of every tensor; bandwidth and dagc: the codec before the first link sample.
  std::string default_codec = "none";
  /// bandwidth, dagc: candidate codecs, mildest first.
  std::vector<std::string> ladder = {"none",
                                     "fp16",
                                     "topk:density=0.1",
                                     "topk:density=0.03",
                                     "topk:density=0.01",
                                     "topk:density=0.003",
                                     "topk:density=0.001"};
  double target_communicate_seconds = 0.1;  // bandwidth, dagc: per step, > 0
  uint64_t warmup_steps = 0;                // steps 0..warmup_steps-1 stay dense
  uint64_t min_compress_elements = 1024;    // smaller tensors stay dense
  /// dagc: mean top-k density over the gateways, in (0, 1]; unset: the density bandwidth chose.
  std::optional<double> traffic_budget = {};
  double min_keep_fraction = 0.001;  // dagc: lowest density a gateway gets, in (0, 1]
  /// Speed assumed for a codec without a CodecSpeed sample (encode and decode), > 0.
  double default_codec_bytes_per_second = 1e9;
  std::vector<LayerRule> rules = {};
};

struct TensorDecision {
  std::string tensor = {};
  std::vector<std::string> codec_per_node = {};  // canonical codec spec, indexed by node
  /// Why: "static", "warm-up", "small tensor", "bandwidth", "bandwidth: target not met",
  /// "break-even: compression slower than the link", "rule <glob>", "dagc",
  /// "no bandwidth sample", "no data-volume sample".
  std::string reason = {};
};

struct PolicyDecision {
  std::vector<TensorDecision> tensors = {};  // in the order of Measurements::tensors
  /// Wire seconds per step of the busiest gateway at the bottleneck goodput; unset without a
  /// link sample.
  std::optional<double> predicted_communicate_seconds = {};
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string_view name() const = 0;
  /// The decision for `measurements`; kInvalidArgument naming the field when a measurement is
  /// unusable (zero, negative or non-finite rates, node ids out of range, duplicates).
  Result<PolicyDecision> decide(const Measurements& measurements) const;

 private:
  /// decide() for measurements that passed the checks.
  virtual Result<PolicyDecision> decide_checked(const Measurements& measurements) const = 0;
};

/// The policy named by settings.name; kInvalidArgument naming the bad setting.
Result<std::unique_ptr<Policy>> make_policy(const PolicySettings& settings);

}  // namespace gradgate::control
