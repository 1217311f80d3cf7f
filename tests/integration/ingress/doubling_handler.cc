#include "doubling_handler.h"

#include <cstring>
#include <string>

#include "gradgate/kernels/half.h"

namespace gradgate::gateway::testing {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

DoublingHandler::DoublingHandler() : thread_([this] { run(); }) {}

DoublingHandler::~DoublingHandler() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Result<JobInfo> DoublingHandler::on_worker_joined(uint32_t local_rank) {
  std::lock_guard lock(mu_);
  if (local_rank >= kJob.local_workers) {
    return Status(ErrorCode::kInvalidArgument,
                  "local rank " + std::to_string(local_rank) + " is not below 4");
  }
  if (!connected.insert(local_rank).second) {
    return Status(ErrorCode::kUnavailable,
                  "local rank " + std::to_string(local_rank) + " is already connected");
  }
  cv_.notify_all();
  return kJob;
}

Result<uint32_t> DoublingHandler::on_declare(uint32_t local_rank, const TensorSpec& spec,
                                             WorkerBuffer buffer) {
  std::lock_guard lock(mu_);
  if (starts_with(spec.name, "reject")) {
    return Status(ErrorCode::kResourceExhausted, "memory cap of 1 MiB reached");
  }
  declared.push_back(spec);
  declared_buffers.push_back(buffer);
  declared_buffers.back().mapping.reset();
  cv_.notify_all();
  for (auto& [key, tensor] : tensors_) {
    if (tensor.local_rank == local_rank && tensor.spec.name == spec.name) {
      tensor.buffer = buffer;  // declared again: the buffer moved
      return key;
    }
  }
  const uint32_t key = next_key_++;
  tensors_.emplace(key, Tensor{local_rank, spec, buffer});
  return key;
}

void DoublingHandler::on_allreduce(uint32_t, uint32_t key,
                                   std::function<void(AllreduceOutcome)> done) {
  std::lock_guard lock(mu_);
  if (starts_with(tensors_.at(key).spec.name, "hold")) {
    held_.push_back(Job{key, std::move(done)});
  } else {
    queue_.push_back(Job{key, std::move(done)});
  }
  cv_.notify_all();
}

void DoublingHandler::on_release(uint32_t, uint32_t key) {
  std::lock_guard lock(mu_);
  released.push_back(key);
  tensors_.erase(key);  // the ingress refuses a release while the tensor's all-reduce runs
  cv_.notify_all();
}

void DoublingHandler::on_worker_left(uint32_t local_rank) {
  std::vector<Job> dropped;
  {
    std::lock_guard lock(mu_);
    connected.erase(local_rank);
    left.push_back(local_rank);
    for (auto it = tensors_.begin(); it != tensors_.end();) {
      it = it->second.local_rank == local_rank ? tensors_.erase(it) : std::next(it);
    }
    auto take_gone = [&](auto& jobs) {
      std::erase_if(jobs, [&](const Job& job) {
        if (tensors_.contains(job.key)) return false;
        dropped.push_back(job);
        return true;
      });
    };
    take_gone(held_);
    take_gone(queue_);
    cv_.notify_all();
  }
  for (Job& job : dropped) {
    job.done(AllreduceOutcome{Status(ErrorCode::kAborted, "the worker left")});
  }
}

void DoublingHandler::release_held() {
  std::lock_guard lock(mu_);
  for (Job& job : held_) queue_.push_back(std::move(job));
  held_.clear();
  cv_.notify_all();
}

bool DoublingHandler::wait_until(const std::function<bool()>& predicate,
                                 std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, predicate);
}

void DoublingHandler::double_in_place(Tensor& tensor) {
  std::byte* data = tensor.buffer.data;
  for (uint64_t i = 0; i < tensor.spec.elements; ++i) {
    if (tensor.spec.dtype == Dtype::kFp32) {
      float v;
      std::memcpy(&v, data + 4 * i, 4);
      v *= 2.0f;
      std::memcpy(data + 4 * i, &v, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, data + 2 * i, 2);
      const bool fp16 = tensor.spec.dtype == Dtype::kFp16;
      const float v = 2.0f * (fp16 ? kernels::fp16_to_float(h) : kernels::bf16_to_float(h));
      h = fp16 ? kernels::float_to_fp16(v) : kernels::float_to_bf16(v);
      std::memcpy(data + 2 * i, &h, 2);
    }
  }
}

void DoublingHandler::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    Tensor& tensor = tensors_.at(job.key);
    AllreduceOutcome outcome;
    outcome.step = tensor.steps++;
    outcome.raw_bytes = tensor.spec.elements * 4;
    outcome.wire_bytes = tensor.spec.elements;
    outcome.encode_seconds = 0.25;
    outcome.communicate_seconds = 0.5;
    outcome.decode_seconds = 0.125;
    outcome.codec = static_cast<CodecId>(outcome.step % kCodecCount);
    if (starts_with(tensor.spec.name, "fail") ||
        (starts_with(tensor.spec.name, "flaky") && outcome.step % 2 == 1)) {
      outcome.status = Status(ErrorCode::kTimeout, "node 3 did not answer within 5 s");
      outcome.codec = CodecId::kTopk;
    } else {
      last_input[job.key].assign(tensor.buffer.data, tensor.buffer.data + tensor.buffer.bytes);
      double_in_place(tensor);
    }
    lock.unlock();
    job.done(std::move(outcome));
    lock.lock();
    cv_.notify_all();
  }
}

}  // namespace gradgate::gateway::testing
