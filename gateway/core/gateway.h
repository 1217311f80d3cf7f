// The gateway's core: what connects the local workers (ingress) to the other gateways
// (collective over a transport).
//
// For each tensor (by name, the same on every worker of the job) it keeps the workers' shared
// buffers, the codec streams (error-feedback residuals, under a memory cap) and a sequence
// number. When every local worker has asked for the all-reduce of a tensor, it sums their buffers
// (local reduce), runs the collective on that node sum on a thread of its own, writes the
// aggregate back into every worker's buffer and completes their requests. A tensor and its
// streams are released when its last worker leaves.
//
// Codecs follow the control plane's policies (policy_table.h): when a tensor's step reaches a
// version's effective step, the tensor changes codec (and algorithm) and its old residuals are
// folded into that step's data, so error feedback loses nothing across the switch.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "gateway/collective/collective_engine.h"
#include "gateway/collective/mailbox.h"
#include "gateway/config/gateway_config.h"
#include "gateway/core/device_tensor.h"
#include "gateway/core/placement.h"
#include "gateway/core/policy_table.h"
#include "gateway/core/step_threads.h"
#include "gateway/ingress/ingress.h"
#include "gateway/transport/log_throttle.h"
#include "gateway/transport/transport.h"
#include "gradgate/kernels/codec.h"

namespace gradgate::gateway {

/// Counters of the core, for logs and metrics.
struct GatewayStats {
  uint64_t allreduces = 0;              // completed
  uint64_t allreduce_errors = 0;        // failed (each counted once per node, not per worker)
  uint64_t raw_bytes = 0;               // fp32 bytes of the node sums all-reduced
  uint64_t wire_bytes = 0;              // bytes sent to other gateways for them
  uint64_t union_elements = 0;          // aggregator mode: elements of the aggregated sums
  uint64_t residual_bytes = 0;          // gauge: codec stream memory
  uint32_t tensors = 0;                 // gauge
  uint32_t workers = 0;                 // gauge: local workers connected
  uint32_t policy_version = 0;          // gauge: the newest policy version received
  uint32_t applied_policy_version = 0;  // gauge: the newest version a step has run under
  uint32_t gpu_tensors_on_gpu = 0;      // gauge: tensors in GPU memory whose codec runs there
  uint32_t gpu_tensors_on_cpu = 0;      // gauge: tensors in GPU memory whose codec runs on the CPU
  uint64_t step_threads = 0;            // gauge: threads the steps run on (StepThreads)
  uint32_t tensors_off_policy = 0;      // gauge: tensors keeping a codec their policy did not name
};

/// A placement probe the gateway made (placement_probe.h), for metrics.
struct PlacementRecord {
  std::string_view codec;  // the codec's name ("topk", static): fit for a metric label
  int device = 0;          // the GPU
  size_t sample_elements = 0;
  PlacementProbe probe;
};

/// One tensor's step as this gateway ran it, for metrics and telemetry.
struct StepRecord {
  Status status;
  uint64_t step = 0;
  uint32_t policy_version = 0;
  std::string_view codec;   // the codec's name ("topk", static): bounded, fit for a metric label
  uint64_t raw_bytes = 0;   // bytes of the node sum in the tensor's dtype (what DDP would send)
  uint64_t fp32_bytes = 0;  // 4 per element: the unit of codec speeds (the node sum is fp32)
  uint64_t wire_bytes = 0;
  double encode_seconds = 0.0, communicate_seconds = 0.0, decode_seconds = 0.0;
  uint64_t union_elements = 0;
  std::string_view device = "cpu";  // where encode and decode ran: "cpu" or "gpu"
  /// From the first local worker's request of the step to the last's: a straggler's lag.
  double local_wait_seconds = 0.0;
};

/// A declared tensor, for telemetry and the admin API.
struct TensorInfo {
  std::string name;
  uint64_t elements = 0, rows = 0, cols = 0;
  Dtype dtype = Dtype::kFp32;
  std::string codec;  // its codec spec now
  uint64_t steps = 0;
};

/// The stable id of a tensor name on the wire (FNV-1a, 32 bits).
uint32_t tensor_id_of(const std::string& name);

class Gateway final : public IngressHandler {
 public:
  /// `transport` must outlive the gateway; the gateway installs its handlers on start().
  Gateway(GatewayConfig config, Transport& transport);
  ~Gateway() override;

  /// Makes the codecs and starts the transport. kInvalidArgument for a codec the config names but
  /// the job cannot run.
  Status start();
  /// Fails every pending all-reduce (kAborted), waits for running ones, stops the transport.
  void stop();

  Result<JobInfo> on_worker_joined(uint32_t local_rank) override;
  Result<uint32_t> on_declare(uint32_t local_rank, const TensorSpec& spec,
                              WorkerBuffer buffer) override;
  void on_allreduce(uint32_t local_rank, uint32_t key,
                    std::function<void(AllreduceOutcome)> done) override;
  void on_release(uint32_t local_rank, uint32_t key) override;
  void on_worker_left(uint32_t local_rank) override;

  GatewayStats stats() const;
  std::vector<TensorInfo> tensors() const;
  /// The placement probes made so far (compression.placement: auto), one per codec, GPU and
  /// sample size.
  std::vector<PlacementRecord> placement_probes() const;
  /// The data volume each local worker declared (its largest), by local rank; 0 if none.
  std::vector<double> worker_data_volumes() const;
  /// Called once per tensor step after it ends, outside the gateway's lock, on the step's
  /// thread. Set before start().
  void set_step_observer(std::function<void(const StepRecord&)> observer);
  /// Takes a policy from the control plane (see policy_table.h). kInvalidArgument for a codec
  /// spec that does not parse; an old version is ignored (ok).
  Status set_policy(CodecPolicy policy);
  MailboxStats mailbox_stats() const { return mailbox_.stats(); }

 private:
  using Done = std::function<void(AllreduceOutcome)>;
  struct Tensor {
    TensorSpec spec;
    uint32_t id = 0;
    std::unique_ptr<kernels::Codec> codec;
    uint32_t policy_version = 0;  // the version its streams were made for
    /// It keeps a codec other than its policy's, which compression.collective cannot run.
    bool off_policy = false;
    /// The policy versions every gateway held in the tensor's last step; none before the first
    /// and after a failed one (the gateways may disagree on what they saw).
    std::optional<HeldPolicies> held_by_all;
    TensorStreams streams;
    std::vector<WorkerBuffer> buffers;  // by local rank; data == nullptr: not declared (any more)
    std::vector<Done> waiting;          // by local rank: asked for the next step
    std::vector<Done> in_flight;        // by local rank: taking part in the running step
    /// By local rank: left after declaring the tensor and not back: no step can complete, and
    /// the next request fails at once (telling the peers) instead of at collective.timeout_ms.
    std::vector<bool> departed;
    uint64_t next_seq = 0;  // the step the next requests take part in
    /// Whether local worker `rank` has asked for a step that has not ended.
    bool has_request(uint32_t rank) const { return waiting[rank] || in_flight[rank]; }
    bool running = false;
    /// Several local workers or 16-bit gradients: the node's fp32 sum, reduced into and written
    /// back from. Empty when the only local worker's fp32 buffer is reduced in place, and for
    /// buffers in GPU memory whose codec runs on the GPU.
    std::vector<float> node_sum;
    /// Buffers in GPU memory: the node sum is made there and the aggregate written back from
    /// there (null for buffers in host memory). With on_gpu the codec runs there too (`codec` a
    /// CUDA codec, `host_codec` its CPU twin for frame sums); otherwise on node_sum, a copy.
    std::unique_ptr<DeviceTensor> device;
    bool on_gpu = false;
    std::unique_ptr<kernels::Codec> host_codec;
    size_t memory_bytes = 0;  // as counted against the cap when declared
    uint64_t skips_seen = 0;  // skips_ when its streams were last made
    std::chrono::steady_clock::time_point first_waiting;  // when the step's first worker asked
    // From the first to the last local worker's request: of the step waiting, of the one running.
    std::chrono::duration<double> waiting_spread{}, in_flight_spread{};
  };

  Status check_spec(const TensorSpec& spec) const;
  /// A new tensor `id` of `spec`, first declared by `local_rank`: its codec (placed), streams and
  /// node sum within the memory cap. Throws std::bad_alloc when the machine has less memory.
  Result<uint32_t> add_tensor_locked(uint32_t local_rank, const TensorSpec& spec, uint32_t id,
                                     WorkerBuffer buffer);
  /// What the config says `tensor` runs with: its codec, or none below min_compress_elements
  /// (for a 16-bit tensor, none is its dtype's codec without error feedback: dense in its own
  /// precision).
  std::string configured_codec(const TensorSpec& tensor) const;
  /// The host memory a tensor's node sum takes: its fp32 elements where the sum is made on the
  /// host (buffers in GPU memory with the codec on the CPU; host buffers not reduced in place).
  size_t host_node_sum_bytes(const TensorSpec& spec, bool gpu_buffers, bool on_gpu) const;
  /// `streams` become the tensor's, counted against the cap in place of its old ones.
  void adopt_streams_locked(Tensor& tensor, TensorStreams streams);
  /// Before step `seq` of `tensor`: when a step of any tensor was skipped for a non-finite
  /// gradient since the tensor's last restart, and `seq` comes after it, the tensor's streams are
  /// made afresh (no residual, no codec state). The loss scaler drops that whole training step,
  /// so nothing of its gradients, scaled by a loss scale too high (as mixed precision meets
  /// them), nor of residuals built under that scale reaches later steps: not in the tensor that
  /// was skipped, nor in the other buckets of that step, which completed. Every gateway skips the
  /// same step, so every one starts afresh; where new streams cannot be made the old ones stay
  /// (logged).
  void restart_after_skip_locked(Tensor& tensor, uint64_t seq);
  /// Streams of `codec` for the tensor, within the memory cap beside the `in_use` bytes.
  Result<TensorStreams> make_streams_locked(const TensorSpec& spec, uint32_t id,
                                            const kernels::Codec& codec, size_t in_use);
  /// The codec of `spec` for `tensor`'s buffers (GPU or CPU, placement.h; `device` null for
  /// buffers in host memory), logged when a tensor in GPU memory runs on the CPU.
  Result<Placement> place_locked(const std::string& spec, const TensorSpec& tensor,
                                 DeviceTensor* device);
  /// probe_placement() for `tensor` on `device`'s GPU, made once per codec, GPU and sample size.
  Result<PlacementProbe> probe_locked(const kernels::Codec& gpu, const kernels::Codec& cpu,
                                      const TensorSpec& tensor, DeviceTensor& device);
  /// kAborted when a local worker of the step left since it asked (its gradient is gone).
  Status check_workers_locked(const Tensor& tensor) const;
  /// The node sum of the step's local workers (`buffers`), where the step's collective reads it.
  /// Runs without the lock: it waits for the workers' GPUs and reads large buffers, while the
  /// gateway takes other requests and other tensors' steps start and end (a running tensor's
  /// sums and device are its step's alone).
  Status gather(Tensor& tensor, const std::vector<WorkerBuffer>& buffers);
  /// The aggregate, in step_data(), back into `buffers` of the step's workers that are still in
  /// it; takes `lock` (held) off while it copies, as gather() runs.
  Status write_back(Tensor& tensor, const std::vector<WorkerBuffer>& buffers,
                    std::unique_lock<std::mutex>& lock);
  /// Where the step's collective runs: the GPU sum, node_sum, or the only worker's buffer.
  std::span<float> step_data(Tensor& tensor, const WorkerBuffer& in_place) const;
  /// Puts `tensor` under the newest policy in effect at `seq` that every gateway holds, before
  /// that step runs (policy_table.h); its old residuals are folded into the step's data.
  Status follow_policy_locked(Tensor& tensor, uint64_t seq, const WorkerBuffer& in_place);
  /// compression.collective cannot run the codec that policy `version` names for `tensor`
  /// (`why`: a ring and a codec that does not sum). compression.collective is the same on every
  /// gateway of a job, so each keeps the codec it has: logged, the tensor marked off_policy, the
  /// version taken as applied. No step fails for it.
  Status keep_codec_locked(Tensor& tensor, uint32_t version, const std::string& wanted,
                           const Status& why);
  AllreduceOp op_of(Tensor& tensor, uint64_t seq, std::span<float> data) const;
  /// Starts the step when every local worker asked; `calls` gets the completions to make once
  /// the lock is released (when the step cannot start).
  void start_if_ready_locked(Tensor& tensor, std::vector<std::function<void()>>& calls);
  void run(uint32_t id, uint64_t seq);
  void finish(Tensor& tensor, const Result<AllreduceReport>& report, uint64_t seq,
              std::unique_lock<std::mutex>& lock);
  /// Detaches local worker `local_rank` from `tensor` (it left or released it): no step of the
  /// tensor can complete without it, so one its other workers asked for fails with `why`.
  void detach_worker_locked(Tensor& tensor, uint32_t local_rank, const std::string& why,
                            std::vector<std::function<void()>>& calls);
  void release_if_unused_locked(uint32_t id);
  /// Fails the requests of tensors whose other local workers did not ask within the timeout.
  void watch_local_waits();
  /// The tensor's next step, which local workers asked for but which cannot run (a worker left
  /// or did not ask in time, the gateway stops), fails: `calls` gets the completions of its
  /// requests, the other gateways are told at once (their workers get `why` instead of waiting
  /// for the timeout), and the tensor moves past the step, as they do, so that every gateway runs
  /// the same step next.
  void fail_next_step_locked(Tensor& tensor, const Status& why,
                             std::vector<std::function<void()>>& calls);

  const GatewayConfig config_;
  Transport& transport_;
  Mailbox mailbox_;
  CollectiveEngine engine_;
  PolicyTable policies_;
  LogThrottle refused_log_;  // used on the transport's thread only

  mutable std::mutex mutex_;
  std::condition_variable idle_;
  std::condition_variable stopping_changed_;
  std::thread watchdog_;
  std::map<uint32_t, Tensor> tensors_;
  using ProbeKey = std::tuple<std::string, int, size_t>;  // codec spec, GPU, sample elements
  std::map<ProbeKey, PlacementRecord> probes_;
  std::vector<bool> connected_;
  std::vector<double> data_volumes_;  // by local rank
  std::function<void(const StepRecord&)> step_observer_;
  size_t running_ = 0;
  bool stopping_ = false;
  // Steps skipped for a non-finite gradient (any tensor), and the sequence number of the last.
  uint64_t skips_ = 0;
  uint64_t last_skipped_seq_ = 0;
  GatewayStats stats_;
  // Last: destroyed first, joining its threads while everything their steps used still exists.
  StepThreads step_threads_;
};

}  // namespace gradgate::gateway
