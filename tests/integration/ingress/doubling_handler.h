// An IngressHandler for tests that sums nothing but does something checkable: it doubles each
// all-reduced buffer on its own thread (recording the bytes it saw first) and completes from
// there, naming codec id `step % kCodecCount` as the step's. Tensors whose names start with
// "hold" wait until release_held(); "fail" ones complete with a peer timeout (and codec kTopk),
// and "flaky" ones so at their odd steps;
// "reject" ones are refused at declare time with kResourceExhausted. A worker that declares a name
// again keeps its key, with the new buffer.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gateway/ingress/ingress.h"

namespace gradgate::gateway::testing {

class DoublingHandler final : public IngressHandler {
 public:
  static constexpr JobInfo kJob{1, 2, 4, 8, 4321};  // node 1 of 2, 4 workers each, 4.321 s

  DoublingHandler();
  ~DoublingHandler() override;

  Result<JobInfo> on_worker_joined(uint32_t local_rank) override;
  Result<uint32_t> on_declare(uint32_t local_rank, const TensorSpec& spec,
                              WorkerBuffer buffer) override;
  void on_allreduce(uint32_t local_rank, uint32_t key,
                    std::function<void(AllreduceOutcome)> done) override;
  void on_release(uint32_t local_rank, uint32_t key) override;
  void on_worker_left(uint32_t local_rank) override;

  std::vector<uint32_t> released;  // keys, in order
  /// Completes every held all-reduce (doubling it).
  void release_held();
  /// Waits until `predicate` (called under the handler's lock) holds, up to `timeout`.
  bool wait_until(const std::function<bool()>& predicate,
                  std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // Read these only inside wait_until's predicate or after the traffic has stopped.
  std::set<uint32_t> connected;
  std::vector<uint32_t> left;
  std::vector<TensorSpec> declared;
  /// The buffers of `declared`, without their mapping (which only the handler's tensors keep
  /// open): their data pointers are valid while the worker stays.
  std::vector<WorkerBuffer> declared_buffers;
  std::map<uint32_t, std::vector<std::byte>> last_input;  // by key
  size_t held_count() const { return held_.size(); }

 private:
  struct Tensor {
    uint32_t local_rank;
    TensorSpec spec;
    WorkerBuffer buffer;
    uint64_t steps = 0;
  };
  struct Job {
    uint32_t key;
    std::function<void(AllreduceOutcome)> done;
  };
  void run();
  void double_in_place(Tensor& tensor);

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint32_t, Tensor> tensors_;
  std::deque<Job> queue_;
  std::vector<Job> held_;
  uint32_t next_key_ = 100;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gradgate::gateway::testing
