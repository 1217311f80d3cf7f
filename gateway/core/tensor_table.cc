#include "gateway/core/tensor_table.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <new>
#include <utility>

namespace gradgate::gateway {
namespace {

const char* memory_name(kernels::MemoryKind memory) {
  return memory == kernels::MemoryKind::kDevice ? "GPU" : "host";
}

}  // namespace

uint32_t tensor_id_of(const std::string& name) {
  uint32_t hash = 2166136261u;
  for (const char c : name) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 16777619u;
  }
  return hash;
}

WorkerBuffer Tensor::in_place(const std::vector<WorkerBuffer>& step_buffers) const {
  return !device && node_sum.empty() ? step_buffers[0] : WorkerBuffer{};
}

std::span<float> Tensor::step_data(const WorkerBuffer& in_place_buffer) {
  if (on_gpu) return device->sum();
  if (in_place_buffer.data != nullptr) {
    return {reinterpret_cast<float*>(in_place_buffer.data), spec.elements};
  }
  return node_sum;
}

Status TensorTable::check_spec(const TensorSpec& spec) {
  if (spec.elements == 0 || spec.elements > kernels::kMaxFrameElements) {
    return Status(ErrorCode::kInvalidArgument, "tensor \"" + spec.name +
                                                   "\": " + std::to_string(spec.elements) +
                                                   " elements is out of range");
  }
  if ((spec.rows != 0 || spec.cols != 0) && spec.rows * spec.cols != spec.elements) {
    return Status(ErrorCode::kInvalidArgument, "tensor \"" + spec.name + "\": shape " +
                                                   std::to_string(spec.rows) + " x " +
                                                   std::to_string(spec.cols) + " does not hold " +
                                                   std::to_string(spec.elements) + " elements");
  }
  return {};
}

Status TensorTable::check_known(const Tensor& known, uint32_t local_rank, const TensorSpec& spec,
                                const WorkerBuffer& buffer) const {
  if (known.spec.name != spec.name) {
    return Status(ErrorCode::kInvalidArgument, "tensor \"" + spec.name +
                                                   "\" has the same id as \"" + known.spec.name +
                                                   "\"; rename one of them");
  }
  if (known.spec.elements != spec.elements || known.spec.dtype != spec.dtype ||
      known.spec.rows != spec.rows || known.spec.cols != spec.cols) {
    return Status(ErrorCode::kInvalidArgument,
                  "tensor \"" + spec.name +
                      "\" was declared with another size, dtype or shape "
                      "by another worker of this node");
  }
  if ((buffer.memory == kernels::MemoryKind::kDevice) != (known.device != nullptr)) {
    return Status(ErrorCode::kInvalidArgument,
                  "tensor \"" + spec.name + "\": local worker " + std::to_string(local_rank) +
                      "'s buffer is in " + memory_name(buffer.memory) +
                      " memory, the other local workers' are not: a node's workers must agree");
  }
  if (known.barrier.has_request(local_rank)) {
    return Status(ErrorCode::kInvalidArgument,
                  "tensor \"" + spec.name + "\" is declared again by local worker " +
                      std::to_string(local_rank) + " while its all-reduce runs");
  }
  return {};
}

Result<uint32_t> TensorTable::declare(uint32_t local_rank, const TensorSpec& spec,
                                      WorkerBuffer buffer) {
  const uint32_t id = tensor_id_of(spec.name);
  if (auto found = tensors_.find(id); found != tensors_.end()) {
    Tensor& known = found->second;
    GRADGATE_RETURN_IF_ERROR(check_known(known, local_rank, spec, buffer));
    known.buffers[local_rank] = buffer;  // a worker's buffer moved: the next step uses it
    known.barrier.rejoined(local_rank);  // or a restarted worker came back
    return id;
  }
  try {
    return add(local_rank, spec, id, std::move(buffer));
  } catch (const std::bad_alloc&) {  // the cap allows more than the machine has: refuse, go on
    return Status(ErrorCode::kResourceExhausted,
                  "tensor \"" + spec.name + "\": out of memory for its node sum and streams (" +
                      std::to_string(spec.elements) + " elements)");
  }
}

Result<uint32_t> TensorTable::add(uint32_t local_rank, const TensorSpec& spec, uint32_t id,
                                  WorkerBuffer buffer) {
  const bool gpu_buffers = buffer.memory == kernels::MemoryKind::kDevice;
  std::unique_ptr<DeviceTensor> device;
  if (gpu_buffers) {
    auto made = DeviceTensor::create(buffer.cuda_device, spec.elements);
    if (!made.ok()) {  // unsupported, not fatal: the worker falls back to shared memory
      return Status(ErrorCode::kUnsupported, "tensor \"" + spec.name +
                                                 "\" in GPU memory: this gateway cannot serve it "
                                                 "on GPU " +
                                                 std::to_string(buffer.cuda_device) + ": " +
                                                 made.status().to_string());
    }
    device = std::move(made).value();
  }
  auto placed = codecs_.place(codecs_.configured(spec), spec, device.get());
  if (!placed.ok()) return placed.status();
  const size_t node_sum_bytes = codecs_.host_node_sum_bytes(spec, gpu_buffers, placed->on_gpu);
  GRADGATE_RETURN_IF_ERROR(codecs_.check_cap(spec.name, node_sum_bytes, memory_bytes_));
  if (placed->on_gpu) GRADGATE_RETURN_IF_ERROR(device->queue().make_current());  // streams' GPU
  auto streams = codecs_.make_streams(spec, id, *placed->codec, memory_bytes_ + node_sum_bytes);
  if (!streams.ok()) return streams.status();
  Tensor tensor(spec, id, codecs_.job().local_workers);
  tensor.codec = std::move(placed->codec);
  tensor.host_codec = std::move(placed->host_codec);
  tensor.on_gpu = placed->on_gpu;
  tensor.device = std::move(device);
  tensor.streams = std::move(streams).value();
  tensor.buffers[local_rank] = buffer;
  tensor.node_sum.resize(node_sum_bytes / sizeof(float));
  tensor.memory_bytes = tensor.streams.memory_bytes() + node_sum_bytes;
  tensor.skips_seen = skips_;
  memory_bytes_ += tensor.memory_bytes;
  spdlog::debug("tensor \"{}\" (id {}): {} elements, codec {} on the {}, {}", spec.name, id,
                spec.elements, tensor.codec->spec(), tensor.on_gpu ? "GPU" : "CPU",
                algorithm_name(tensor.streams.algorithm));
  tensors_.emplace(id, std::move(tensor));
  return id;
}

Tensor* TensorTable::find(uint32_t id) {
  const auto found = tensors_.find(id);
  return found == tensors_.end() ? nullptr : &found->second;
}

bool TensorTable::release_if_unused(uint32_t id) {
  auto found = tensors_.find(id);
  if (found == tensors_.end() || found->second.barrier.running()) return false;
  for (const WorkerBuffer& buffer : found->second.buffers) {
    if (buffer.data != nullptr) return false;
  }
  memory_bytes_ -= found->second.memory_bytes;
  tensors_.erase(found);
  return true;
}

void TensorTable::adopt_streams(Tensor& tensor, TensorStreams streams) {
  const size_t memory = streams.memory_bytes() + tensor.node_sum.size() * sizeof(float);
  memory_bytes_ = memory_bytes_ - tensor.memory_bytes + memory;
  tensor.memory_bytes = memory;
  tensor.streams = std::move(streams);
}

void TensorTable::step_skipped(uint64_t step) {
  ++skips_;
  last_skipped_step_ = step;
}

void TensorTable::restart_after_skip(Tensor& tensor, uint64_t step) {
  if (tensor.skips_seen == skips_ || step <= last_skipped_step_) return;
  tensor.skips_seen = skips_;
  if (tensor.streams.memory_bytes() == 0) return;  // no residual, no codec state
  const size_t old_bytes = tensor.memory_bytes - tensor.node_sum.size() * sizeof(float);
  const Status current = tensor.on_gpu ? tensor.device->queue().make_current() : Status{};
  Result<TensorStreams> streams =
      current.ok()
          ? codecs_.make_streams(tensor.spec, tensor.id, *tensor.codec, memory_bytes_ - old_bytes)
          : Result<TensorStreams>(current);
  if (!streams.ok()) {
    spdlog::warn("tensor \"{}\": step {} was skipped, its error feedback goes on: {}",
                 tensor.spec.name, last_skipped_step_, streams.status().to_string());
    return;
  }
  adopt_streams(tensor, std::move(streams).value());
  spdlog::info(
      "tensor \"{}\": step {} was skipped for a non-finite gradient; its error feedback starts "
      "afresh at step {}",
      tensor.spec.name, last_skipped_step_, step);
}

uint32_t TensorTable::oldest_version(uint32_t version) const {
  for (const auto& [id, tensor] : tensors_) version = std::min(version, tensor.policy.version);
  return version;
}

std::vector<TensorInfo> TensorTable::infos() const {
  std::vector<TensorInfo> infos;
  for (const auto& [id, tensor] : tensors_) {
    infos.push_back({tensor.spec.name, tensor.spec.elements, tensor.spec.rows, tensor.spec.cols,
                     tensor.spec.dtype, tensor.codec->spec(), tensor.barrier.next_step()});
  }
  return infos;
}

}  // namespace gradgate::gateway
