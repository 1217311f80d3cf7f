// The gateway's steps: when every local worker asked for a tensor's step, the runner gathers
// their buffers into the node sum, puts the tensor under its policy (codec_switch.h), runs the
// collective, writes the aggregate back and completes the requests; a step that cannot run fails
// here, the other gateways told at once. It owns the one lock of the gateway's state (the tensor
// table, the codec switch, the counters) and is the only place that drops it in the middle of a
// step: for the gather, the collective and the write-back, which wait on GPUs and peers while
// the gateway takes other requests and other tensors' steps start and end (a running tensor's
// sums and device are its step's alone). Clang's -Wthread-safety checks the locking.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/collective/collective_engine.h"
#include "gateway/collective/mailbox.h"
#include "gateway/core/codec_switch.h"
#include "gateway/core/step_threads.h"
#include "gateway/core/tensor_codecs.h"
#include "gateway/core/tensor_table.h"
#include "gradgate/base/mutex.h"

namespace gradgate::gateway {

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

/// The steps' totals.
struct StepCounters {
  uint64_t allreduces = 0;        // completed
  uint64_t allreduce_errors = 0;  // failed (each counted once per node, not per worker)
  uint64_t raw_bytes = 0;         // bytes of the node sums all-reduced, in their dtype
  uint64_t wire_bytes = 0;        // bytes sent to other gateways for them
  uint64_t union_elements = 0;    // aggregator mode: elements of the aggregated sums
};

class StepRunner {
 public:
  using Done = LocalBarrier::Done;
  /// Completions to make once the lock is released.
  using Calls = std::vector<std::function<void()>>;

  /// The steps of `job`'s tensors; `mailbox` and `engine` must outlive the runner.
  StepRunner(JobShape job, TensorCodecs::Settings settings, Mailbox& mailbox,
             CollectiveEngine& engine);

  Mutex& mutex() const GRADGATE_RETURN_CAPABILITY(mutex_) { return mutex_; }
  TensorCodecs& codecs() GRADGATE_REQUIRES(mutex_) { return codecs_; }
  const TensorCodecs& codecs() const GRADGATE_REQUIRES(mutex_) { return codecs_; }
  TensorTable& table() GRADGATE_REQUIRES(mutex_) { return table_; }
  const TensorTable& table() const GRADGATE_REQUIRES(mutex_) { return table_; }
  CodecSwitch& codec_switch() GRADGATE_REQUIRES(mutex_) { return switch_; }
  const CodecSwitch& codec_switch() const GRADGATE_REQUIRES(mutex_) { return switch_; }
  const StepCounters& counters() const GRADGATE_REQUIRES(mutex_) { return counters_; }
  bool stopping() const GRADGATE_REQUIRES(mutex_) { return stopping_; }
  size_t threads() const { return threads_.threads(); }
  /// Called once per step after it ends, without the lock, on the step's thread. Set before the
  /// first request.
  void set_observer(std::function<void(const StepRecord&)> observer);

  /// Local worker `rank` asks for the next step of `tensor`: it starts when every local worker
  /// asked, and fails at once when one of them left.
  void request(Tensor& tensor, uint32_t rank, Done done, Calls& calls) GRADGATE_REQUIRES(mutex_);
  /// Local worker `rank` left or released `tensor`: no step of it can complete without the
  /// worker, so one its other workers asked for fails with `why`.
  void detach(Tensor& tensor, uint32_t rank, const std::string& why, Calls& calls)
      GRADGATE_REQUIRES(mutex_);
  void release_if_unused(uint32_t id) GRADGATE_REQUIRES(mutex_);
  /// Fails the next steps whose other local workers did not ask within `timeout`.
  void fail_overdue(std::chrono::milliseconds timeout, Calls& calls) GRADGATE_REQUIRES(mutex_);
  /// Starts no more steps and fails those asked for; false when already stopping.
  bool begin_stop(Calls& calls) GRADGATE_REQUIRES(mutex_);
  /// Waits until every running step made its completions.
  void wait_idle() GRADGATE_EXCLUDES(mutex_);

 private:
  struct Finished {
    AllreduceOutcome outcome;
    std::vector<Done> done;
    StepRecord record;
  };

  void start_if_ready(Tensor& tensor, Calls& calls) GRADGATE_REQUIRES(mutex_);
  /// The tensor's next step, which local workers asked for but which cannot run, fails: `calls`
  /// gets the completions of its requests, the other gateways are told at once (their workers
  /// get `why` instead of waiting for the timeout), and the tensor moves past the step, as they
  /// do, so that every gateway runs the same step next.
  void fail_next_step(Tensor& tensor, const Status& why, Calls& calls) GRADGATE_REQUIRES(mutex_);
  void run(uint32_t id, uint64_t step) GRADGATE_EXCLUDES(mutex_);
  /// Before the collective: fresh streams after a skipped step, the tensor's policy.
  Status prepare(Tensor& tensor, uint64_t step, const WorkerBuffer& in_place)
      GRADGATE_REQUIRES(mutex_);
  Finished finish(Tensor& tensor, const Result<AllreduceReport>& report, uint64_t step)
      GRADGATE_REQUIRES(mutex_);
  AllreduceOp op_of(Tensor& tensor, uint64_t step, std::span<float> data) const
      GRADGATE_REQUIRES(mutex_);

  Mailbox& mailbox_;
  CollectiveEngine& engine_;
  std::function<void(const StepRecord&)> observer_;

  mutable Mutex mutex_;
  CondVar idle_;
  TensorCodecs codecs_ GRADGATE_GUARDED_BY(mutex_);
  TensorTable table_ GRADGATE_GUARDED_BY(mutex_);
  CodecSwitch switch_ GRADGATE_GUARDED_BY(mutex_);
  StepCounters counters_ GRADGATE_GUARDED_BY(mutex_);
  size_t running_ GRADGATE_GUARDED_BY(mutex_) = 0;
  bool stopping_ GRADGATE_GUARDED_BY(mutex_) = false;
  // Last: destroyed first, joining its threads while everything their steps used still exists.
  StepThreads threads_;
};

}  // namespace gradgate::gateway
