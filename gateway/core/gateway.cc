#include "gateway/core/gateway.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <utility>

namespace gradgate::gateway {

Gateway::Gateway(Options options, Transport& transport)
    : options_(std::move(options)),
      transport_(transport),
      // Every peer may have up to a send queue's worth of messages on their way to us.
      mailbox_(options_.job.nodes, transport_,
               options_.send_queue_bytes * std::max<size_t>(1, options_.job.nodes - 1),
               options_.timeout * 2),
      engine_({options_.job.node_rank, options_.job.nodes, options_.job.id, options_.timeout},
              transport_, mailbox_),
      runner_(options_.job, options_.codecs, mailbox_, engine_),
      connected_(options_.job.local_workers, false),
      data_volumes_(options_.job.local_workers, 0.0) {}

Gateway::~Gateway() { stop(); }

Status Gateway::start() {
  {
    MutexLock lock(runner_.mutex());
    GRADGATE_RETURN_IF_ERROR(runner_.codecs().check_configured());
  }
  GRADGATE_RETURN_IF_ERROR(transport_.start(engine_.transport_handlers()));
  watchdog_ = std::thread([this] { watch_local_waits(); });
  return {};
}

void Gateway::watch_local_waits() {
  StepRunner::Calls calls;
  MutexLock lock(runner_.mutex());
  while (!runner_.stopping()) {
    stopping_changed_.wait_for(lock, std::chrono::milliseconds(100));
    runner_.fail_overdue(options_.timeout, calls);
    lock.unlock();
    for (auto& call : calls) call();
    calls.clear();
    lock.lock();
  }
}

void Gateway::stop() {
  StepRunner::Calls calls;
  {
    MutexLock lock(runner_.mutex());
    if (!runner_.begin_stop(calls)) return;
  }
  stopping_changed_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  for (auto& call : calls) call();
  mailbox_.shutdown();
  runner_.wait_idle();
  transport_.stop();
}

Result<JobInfo> Gateway::on_worker_joined(uint32_t local_rank) {
  MutexLock lock(runner_.mutex());
  if (local_rank >= connected_.size()) {
    return Status(ErrorCode::kInvalidArgument, "local rank " + std::to_string(local_rank) +
                                                   " is out of range: this gateway has " +
                                                   std::to_string(connected_.size()) +
                                                   " local workers (job.local_workers)");
  }
  if (connected_[local_rank]) {
    return Status(ErrorCode::kUnavailable,
                  "local rank " + std::to_string(local_rank) + " is already connected");
  }
  connected_[local_rank] = true;
  spdlog::info("local worker {} joined", local_rank);
  const JobShape& job = options_.job;
  const auto timeout_ms = std::min<int64_t>(options_.timeout.count(), UINT32_MAX);
  return JobInfo{job.node_rank, job.nodes, job.local_workers, job.nodes * job.local_workers,
                 static_cast<uint32_t>(timeout_ms)};
}

Result<uint32_t> Gateway::on_declare(uint32_t local_rank, const TensorSpec& spec,
                                     WorkerBuffer buffer) {
  GRADGATE_RETURN_IF_ERROR(TensorTable::check_spec(spec));
  MutexLock lock(runner_.mutex());
  if (local_rank >= connected_.size() || !connected_[local_rank]) {
    return Status(ErrorCode::kInvalidArgument, "declare before hello");
  }
  if (std::isfinite(spec.data_volume) && spec.data_volume > data_volumes_[local_rank]) {
    data_volumes_[local_rank] = spec.data_volume;
  }
  return runner_.table().declare(local_rank, spec, std::move(buffer));
}

void Gateway::on_allreduce(uint32_t local_rank, uint32_t key, StepRunner::Done done) {
  MutexLock lock(runner_.mutex());
  Tensor* tensor = runner_.table().find(key);
  Status refused;
  if (runner_.stopping()) {
    refused = Status(ErrorCode::kAborted, "the gateway is stopping");
  } else if (tensor == nullptr || local_rank >= tensor->buffers.size() ||
             tensor->buffers[local_rank].data == nullptr) {
    refused = Status(ErrorCode::kNotFound, "tensor key " + std::to_string(key) +
                                               " is not declared by local worker " +
                                               std::to_string(local_rank));
  } else if (tensor->barrier.has_request(local_rank)) {
    refused = Status(
        ErrorCode::kInvalidArgument,
        "tensor \"" + tensor->spec.name + "\" already has an all-reduce in flight for this worker");
  }
  if (!refused.ok()) {
    lock.unlock();
    done(AllreduceOutcome{refused});
    return;
  }
  StepRunner::Calls calls;
  runner_.request(*tensor, local_rank, std::move(done), calls);
  lock.unlock();
  for (auto& call : calls) call();
}

void Gateway::on_worker_left(uint32_t local_rank) {
  StepRunner::Calls calls;
  {
    MutexLock lock(runner_.mutex());
    if (local_rank >= connected_.size() || !connected_[local_rank]) return;
    connected_[local_rank] = false;
    spdlog::info("local worker {} left", local_rank);
    std::vector<uint32_t> ids;
    for (auto& [id, tensor] : runner_.table().all()) {
      runner_.detach(tensor, local_rank,
                     "local worker " + std::to_string(local_rank) +
                         " left before taking part in the all-reduce of \"" + tensor.spec.name +
                         "\"",
                     calls);
      ids.push_back(id);
    }
    for (uint32_t id : ids) runner_.release_if_unused(id);
  }
  for (auto& call : calls) call();
}

void Gateway::on_release(uint32_t local_rank, uint32_t key) {
  StepRunner::Calls calls;
  {
    MutexLock lock(runner_.mutex());
    Tensor* tensor = runner_.table().find(key);
    if (tensor == nullptr || local_rank >= tensor->buffers.size()) return;
    spdlog::debug("tensor \"{}\": released by local worker {}", tensor->spec.name, local_rank);
    runner_.detach(*tensor, local_rank,
                   "local worker " + std::to_string(local_rank) + " released \"" +
                       tensor->spec.name + "\" while the others asked for its all-reduce",
                   calls);
    runner_.release_if_unused(key);
  }
  for (auto& call : calls) call();
}

Status Gateway::set_policy(CodecPolicy policy) {
  MutexLock lock(runner_.mutex());
  return runner_.codec_switch().add_policy(std::move(policy));
}

GatewayStats Gateway::stats() const {
  MutexLock lock(runner_.mutex());
  GatewayStats stats;
  static_cast<StepCounters&>(stats) = runner_.counters();
  const TensorTable& table = runner_.table();
  stats.residual_bytes = table.memory_bytes();
  stats.tensors = static_cast<uint32_t>(table.all().size());
  stats.workers = static_cast<uint32_t>(std::count(connected_.begin(), connected_.end(), true));
  stats.policy_version = runner_.codec_switch().received_version();
  stats.applied_policy_version = runner_.codec_switch().applied_version();
  stats.step_threads = runner_.threads();
  for (const auto& [id, tensor] : table.all()) {
    stats.tensors_off_policy += tensor.policy.off_policy ? 1 : 0;
    if (!tensor.device) continue;
    ++(tensor.on_gpu ? stats.gpu_tensors_on_gpu : stats.gpu_tensors_on_cpu);
  }
  return stats;
}

std::vector<PlacementRecord> Gateway::placement_probes() const {
  MutexLock lock(runner_.mutex());
  return runner_.codecs().probes();
}

std::vector<TensorInfo> Gateway::tensors() const {
  MutexLock lock(runner_.mutex());
  return runner_.table().infos();
}

std::vector<double> Gateway::worker_data_volumes() const {
  MutexLock lock(runner_.mutex());
  return data_volumes_;
}

void Gateway::set_step_observer(std::function<void(const StepRecord&)> observer) {
  runner_.set_observer(std::move(observer));
}

}  // namespace gradgate::gateway
