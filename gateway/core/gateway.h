// The gateway's core: what connects the local workers (ingress) to the other gateways
// (collective over a transport). It implements the ingress interface by delegating to its
// stages: the tensor table (tensor_table.h: declare, release, memory cap), each tensor's local
// barrier (local_barrier.h: workers in, timeouts, departures) and the step runner
// (step_runner.h: gather, policy, collective, write-back, finish), which owns the one lock.
// Codecs follow the control plane's policies (codec_switch.h): every gateway switches a tensor's
// codec at the same step, its old residuals folded into that step's data.
#pragma once

#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "gateway/collective/collective_engine.h"
#include "gateway/collective/mailbox.h"
#include "gateway/core/gateway_stats.h"
#include "gateway/core/step_runner.h"
#include "gateway/ingress/ingress.h"
#include "gateway/transport/transport.h"
#include "gradgate/base/mutex.h"

namespace gradgate::gateway {

class Gateway final : public IngressHandler {
 public:
  /// The part of the configuration the core runs by (gateway/startup makes it from the file).
  struct Options {
    JobShape job;
    TensorCodecs::Settings codecs;
    std::chrono::milliseconds timeout;  // job.timeout_ms: a step not done by then fails
    uint64_t send_queue_bytes;          // transport.send_queue_bytes: what each peer may have
                                        // on its way to this gateway
  };

  /// `transport` must outlive the gateway; the gateway installs its handlers on start().
  Gateway(Options options, Transport& transport);
  ~Gateway() override;

  /// Checks the configured codec and starts the transport. kInvalidArgument for a codec the
  /// config names but the job cannot run.
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
  /// Takes a policy from the control plane (gateway/agreement/switch_agreement.h). kInvalidArgument
  /// for a codec spec that does not parse; an old version is ignored (ok).
  Status set_policy(CodecPolicy policy);
  MailboxStats mailbox_stats() const { return mailbox_.stats(); }

 private:
  /// Fails the requests of tensors whose other local workers did not ask within the timeout.
  void watch_local_waits();

  const Options options_;
  Transport& transport_;
  Mailbox mailbox_;
  CollectiveEngine engine_;
  StepRunner runner_;
  CondVar stopping_changed_;
  std::thread watchdog_;
  std::vector<bool> connected_ GRADGATE_GUARDED_BY(runner_.mutex());
  std::vector<double> data_volumes_ GRADGATE_GUARDED_BY(runner_.mutex());  // by local rank
};

}  // namespace gradgate::gateway
