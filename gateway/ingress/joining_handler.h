// The ingress handler of a gateway from its start until it serves: the Unix socket exists from the
// start, so a worker that connects while the gateway claims its rank, waits for the other
// gateways of its job to register, or connects to them, is told so and waits (its HELLO is
// refused with kAborted, which it gets as GG_CLOSED and gg_connect_wait tries again), instead of
// finding no socket and taking the gateway for absent. serve() hands every call to the gateway.
#pragma once

#include <atomic>
#include <mutex>
#include <string>

#include "gateway/ingress/ingress.h"

namespace gradgate::gateway {

class JoiningHandler final : public IngressHandler {
 public:
  /// What the gateway is doing now, for the workers it refuses ("claiming its rank ...").
  void set_stage(std::string stage);
  /// From now on every call goes to `gateway`, which must outlive the ingress server's sessions.
  void serve(IngressHandler& gateway) { gateway_.store(&gateway); }

  Result<JobInfo> on_worker_joined(uint32_t local_rank) override;
  // A worker reaches these only after its HELLO succeeded, so once serve() was called.
  Result<uint32_t> on_declare(uint32_t local_rank, const TensorSpec& spec,
                              WorkerBuffer buffer) override {
    return gateway_.load()->on_declare(local_rank, spec, std::move(buffer));
  }
  void on_allreduce(uint32_t local_rank, uint32_t key,
                    std::function<void(AllreduceOutcome)> done) override {
    gateway_.load()->on_allreduce(local_rank, key, std::move(done));
  }
  void on_release(uint32_t local_rank, uint32_t key) override {
    gateway_.load()->on_release(local_rank, key);
  }
  void on_worker_left(uint32_t local_rank) override;

 private:
  std::atomic<IngressHandler*> gateway_{nullptr};
  std::mutex mutex_;  // guards stage_
  std::string stage_ = "starting";
};

}  // namespace gradgate::gateway
