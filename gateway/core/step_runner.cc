#include "gateway/core/step_runner.h"

#include <spdlog/spdlog.h>

#include <system_error>
#include <utility>

#include "gateway/core/local_reduce.h"

namespace gradgate::gateway {
namespace {

AllreduceOutcome outcome_of(const Result<AllreduceReport>& report, uint64_t step, size_t raw_bytes,
                            CodecId codec) {
  AllreduceOutcome outcome;
  outcome.step = step;
  outcome.raw_bytes = raw_bytes;
  outcome.codec = codec;
  if (!report.ok()) {
    outcome.status = report.status();
    return outcome;
  }
  outcome.wire_bytes = report->wire_bytes;
  outcome.encode_seconds = report->encode_seconds;
  outcome.communicate_seconds = report->communicate_seconds;
  outcome.decode_seconds = report->decode_seconds;
  return outcome;
}

// What DDP's own all-reduce would send of a tensor: its elements in its dtype.
size_t raw_bytes(const TensorSpec& tensor) { return tensor.elements * dtype_bytes(tensor.dtype); }

// The node sum of the step's local workers (`buffers`), where the step's collective reads it.
Status gather(Tensor& tensor, const std::vector<WorkerBuffer>& buffers) {
  if (tensor.device) {
    GRADGATE_RETURN_IF_ERROR(tensor.device->reduce(buffers, tensor.spec.dtype));
    return tensor.on_gpu ? Status() : tensor.device->copy_sum_to_host(tensor.node_sum);
  }
  if (!tensor.node_sum.empty()) sum_worker_buffers(buffers, tensor.spec.dtype, tensor.node_sum);
  return {};
}

// The aggregate, in the step's data, back into the `buffers` of the step's workers that are
// still in it (`to`): one that left and came back has a new buffer.
Status write_back(Tensor& tensor, const std::vector<WorkerBuffer>& buffers,
                  const std::vector<bool>& to) {
  if (tensor.device) {
    Status written;
    if (!tensor.on_gpu) written = tensor.device->copy_sum_from_host(tensor.node_sum);
    if (written.ok()) written = tensor.device->write_back(buffers, to, tensor.spec.dtype);
    return written;
  }
  if (!tensor.node_sum.empty()) {
    for (size_t rank = 0; rank < buffers.size(); ++rank) {
      if (to[rank]) write_worker_buffer(tensor.node_sum, tensor.spec.dtype, buffers[rank]);
    }
  }
  return {};
}

Result<AllreduceReport> collect(CollectiveEngine& engine, const AllreduceOp& op) {
  try {
    return engine.allreduce(op);
  } catch (const std::exception& error) {  // bad_alloc: fail the step, keep the daemon
    return Status(ErrorCode::kResourceExhausted, std::string("all-reduce: ") + error.what());
  }
}

}  // namespace

StepRunner::StepRunner(JobShape job, TensorCodecs::Settings settings, Mailbox& mailbox,
                       CollectiveEngine& engine)
    : mailbox_(mailbox),
      engine_(engine),
      codecs_(job, std::move(settings)),
      table_(codecs_),
      switch_(codecs_, table_, mailbox_) {}

void StepRunner::set_observer(std::function<void(const StepRecord&)> observer) {
  observer_ = std::move(observer);
}

void StepRunner::request(Tensor& tensor, uint32_t rank, Done done, Calls& calls) {
  tensor.barrier.ask(rank, std::move(done));
  if (const auto gone = tensor.barrier.departed()) {
    fail_next_step(tensor,
                   Status(ErrorCode::kAborted, "local worker " + std::to_string(*gone) +
                                                   " left or released \"" + tensor.spec.name +
                                                   "\": no step of it can complete"),
                   calls);
  } else {
    start_if_ready(tensor, calls);
  }
}

void StepRunner::detach(Tensor& tensor, uint32_t rank, const std::string& why, Calls& calls) {
  const bool asked = tensor.barrier.waiting() != 0;
  tensor.barrier.detach(rank, tensor.buffers[rank].data != nullptr);
  tensor.buffers[rank] = WorkerBuffer{};
  if (asked) fail_next_step(tensor, Status(ErrorCode::kAborted, why), calls);
}

void StepRunner::release_if_unused(uint32_t id) {
  if (table_.release_if_unused(id)) mailbox_.forget_tensor(id);
}

void StepRunner::fail_overdue(std::chrono::milliseconds timeout, Calls& calls) {
  const auto now = LocalBarrier::Clock::now();
  for (auto& [id, tensor] : table_.all()) {
    if (!tensor.barrier.overdue(now, timeout)) continue;
    fail_next_step(tensor,
                   Status(ErrorCode::kTimeout,
                          "only " + std::to_string(tensor.barrier.waiting()) + " of the " +
                              std::to_string(tensor.barrier.local_workers()) +
                              " local workers asked for the all-reduce of \"" + tensor.spec.name +
                              "\" within collective.timeout_ms"),
                   calls);
  }
}

bool StepRunner::begin_stop(Calls& calls) {
  if (stopping_) return false;
  stopping_ = true;
  for (auto& [id, tensor] : table_.all()) {
    if (tensor.barrier.waiting() != 0) {
      fail_next_step(tensor, Status(ErrorCode::kAborted, "the gateway is stopping"), calls);
    }
  }
  return true;
}

void StepRunner::wait_idle() {
  MutexLock lock(mutex_);
  while (running_ != 0) idle_.wait(lock);
}

void StepRunner::start_if_ready(Tensor& tensor, Calls& calls) {
  if (stopping_) return;
  const auto step = tensor.barrier.begin_step();
  if (!step) return;
  ++running_;
  try {
    threads_.run([this, id = tensor.id, step = *step] { run(id, step); });
  } catch (const std::system_error& error) {
    --running_;
    tensor.barrier.undo_begin(*step);
    fail_next_step(tensor,
                   Status(ErrorCode::kResourceExhausted,
                          std::string("cannot start the all-reduce: ") + error.what()),
                   calls);
  }
}

void StepRunner::fail_next_step(Tensor& tensor, const Status& why, Calls& calls) {
  CodecSwitch::step_failed(tensor);
  auto [step, waiting] = tensor.barrier.skip_step();
  for (auto& done : waiting) {
    calls.push_back([done = std::move(done), why, step = step] {
      AllreduceOutcome outcome;
      outcome.status = why;
      outcome.step = step;
      done(outcome);
    });
  }
  const AllreduceOp op = op_of(tensor, step, {});
  // While the step before runs, what its peers sent for it must stay filed.
  if (tensor.barrier.running()) {
    engine_.tell_abort(op, why);
  } else {
    engine_.abort(op, why);
  }
}

void StepRunner::run(uint32_t id, uint64_t step) {
  MutexLock lock(mutex_);
  Tensor& tensor = *table_.find(id);  // not released while running
  // The step's buffers, copied with their mappings: the gather and the write-back run without the
  // lock, and a worker that leaves meanwhile does not pull its buffer from under them or from
  // under an all-reduce in place.
  const std::vector<WorkerBuffer> buffers = tensor.buffers;
  const WorkerBuffer in_place = tensor.in_place(buffers);
  Status prepared;
  // A worker that left between asking and the gather took its gradient along (and one that came
  // back since holds a new buffer): the node's sum would miss it.
  if (const auto left = tensor.barrier.left_step()) {
    prepared = Status(ErrorCode::kAborted, "local worker " + std::to_string(*left) +
                                               " left before the step of \"" + tensor.spec.name +
                                               "\" began");
  } else {
    lock.unlock();  // waits for the workers' GPUs, sums large buffers
    prepared = gather(tensor, buffers);
    lock.lock();
  }
  if (prepared.ok()) prepared = prepare(tensor, step, in_place);
  Result<AllreduceReport> report = Status(ErrorCode::kInternal, "no result");
  if (!prepared.ok()) {
    report = prepared;
    engine_.abort(op_of(tensor, step, tensor.step_data(in_place)), prepared);
  } else {
    const AllreduceOp op = op_of(tensor, step, tensor.step_data(in_place));
    lock.unlock();
    report = collect(engine_, op);
    lock.lock();
    if (report.ok()) {
      const std::vector<bool> to = tensor.barrier.in_step();
      lock.unlock();
      Status written = write_back(tensor, buffers, to);
      lock.lock();
      if (!written.ok()) report = written;
    }
  }
  Finished finished = finish(tensor, report, step);
  lock.unlock();
  for (auto& done : finished.done) done(finished.outcome);
  if (observer_) observer_(finished.record);
  lock.lock();
  Calls calls;
  release_if_unused(id);
  if (Tensor* next = table_.find(id)) start_if_ready(*next, calls);  // it may be waiting already
  lock.unlock();
  for (auto& call : calls) call();
  lock.lock();
  --running_;  // last: stop() returns only after every completion of this step was made
  idle_.notify_all();
}

Status StepRunner::prepare(Tensor& tensor, uint64_t step, const WorkerBuffer& in_place) {
  try {
    table_.restart_after_skip(tensor, step);
    return switch_.follow(tensor, step, in_place);
  } catch (const std::exception& error) {  // bad_alloc making new streams: fail the step
    return Status(ErrorCode::kResourceExhausted,
                  std::string("preparing the step: ") + error.what());
  }
}

StepRunner::Finished StepRunner::finish(Tensor& tensor, const Result<AllreduceReport>& report,
                                        uint64_t step) {
  if (report.ok()) {
    ++counters_.allreduces;
    counters_.raw_bytes += raw_bytes(tensor.spec);
    counters_.wire_bytes += report->wire_bytes;
    counters_.union_elements += report->union_elements;
  } else {
    ++counters_.allreduce_errors;
    spdlog::warn("tensor \"{}\": {}", tensor.spec.name, report.status().to_string());
    if (report.status().code() == ErrorCode::kNonFiniteGradient) table_.step_skipped(step);
  }
  // Failed, or a later step already failed here while this one ran (fail_next_step): the
  // gateways may disagree on what they held, as after a failure on every gateway.
  CodecSwitch::step_ended(tensor, report, tensor.barrier.next_step() > step + 1);
  Finished finished;
  finished.outcome = outcome_of(report, step, raw_bytes(tensor.spec), tensor.codec->id());
  const AllreduceOutcome& outcome = finished.outcome;
  finished.record = {outcome.status,
                     step,
                     tensor.policy.version,
                     codec_name(outcome.codec),
                     outcome.raw_bytes,
                     tensor.spec.elements * sizeof(float),
                     outcome.wire_bytes,
                     outcome.encode_seconds,
                     outcome.communicate_seconds,
                     outcome.decode_seconds,
                     report.ok() ? report->union_elements : 0,
                     tensor.on_gpu ? "gpu" : "cpu",
                     tensor.barrier.step_spread_seconds()};
  finished.done = tensor.barrier.end_step();
  return finished;
}

AllreduceOp StepRunner::op_of(Tensor& tensor, uint64_t step, std::span<float> data) const {
  AllreduceOp op{tensor.id, step, switch_.stamp(tensor), data, tensor.codec.get(), &tensor.streams};
  if (tensor.on_gpu) {
    op.memory = kernels::MemoryKind::kDevice;
    op.queue = &tensor.device->queue();
    op.host_codec = tensor.host_codec.get();
    op.staging = &tensor.device->frame_staging();
  }
  return op;
}

}  // namespace gradgate::gateway
