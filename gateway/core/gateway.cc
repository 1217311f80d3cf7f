#include "gateway/core/gateway.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <new>
#include <system_error>
#include <thread>
#include <utility>

#include "gateway/core/local_reduce.h"
#include "gradgate/kernels/codec_spec.h"

namespace gradgate::gateway {
namespace {

/// Whether any local worker's request is among `requests` (by local rank; empty: none).
bool any_request(const std::vector<std::function<void(AllreduceOutcome)>>& requests) {
  return std::any_of(requests.begin(), requests.end(),
                     [](const auto& request) { return request != nullptr; });
}

// Every local worker has asked.
bool all_requested(const std::vector<std::function<void(AllreduceOutcome)>>& requests) {
  return std::all_of(requests.begin(), requests.end(),
                     [](const auto& request) { return request != nullptr; });
}

AllreduceOutcome outcome_of(const Result<AllreduceReport>& report, uint64_t seq, size_t raw_bytes,
                            kernels::CodecId codec) {
  AllreduceOutcome outcome;
  outcome.step = seq;
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

// A single local worker's fp32 buffer needs no node sum: the all-reduce reads and writes it.
bool reduces_in_place(uint32_t local_workers, Dtype dtype) {
  return local_workers == 1 && dtype == Dtype::kFp32;
}

const char* memory_name(kernels::MemoryKind memory) {
  return memory == kernels::MemoryKind::kDevice ? "GPU" : "host";
}

// What DDP's own all-reduce would send of a tensor: its elements in its dtype.
size_t raw_bytes(const TensorSpec& tensor) { return tensor.elements * dtype_bytes(tensor.dtype); }

// `spec`, or for codec `none` on a 16-bit tensor that dtype's codec without error feedback: a
// dense tensor goes on the wire in its own precision, as DDP's all-reduce sends it, not at twice
// its size as fp32. A node sum or a sum of frames beyond fp16's range skips the step, as it would
// be infinite in DDP's fp16 all-reduce (element_rules.h: half_sendable).
std::string dense_in_own_dtype(const TensorSpec& tensor, const std::string& spec) {
  if (tensor.dtype == Dtype::kFp32) return spec;
  const auto params = kernels::parse_codec_spec(spec);
  if (!params.ok() || params->id != kernels::CodecId::kNone) return spec;
  return kernels::format_codec_spec(kernels::sent_in_precision(
      *params, tensor.dtype == Dtype::kFp16 ? kernels::CodecId::kFp16 : kernels::CodecId::kBf16));
}

Status over_cap(const std::string& tensor, size_t wanted, size_t in_use, size_t cap) {
  return Status(ErrorCode::kResourceExhausted,
                "tensor \"" + tensor + "\" needs " + std::to_string(wanted) +
                    " bytes of stream state; with the " + std::to_string(in_use) +
                    " bytes in use that passes streams.residual_memory_cap_bytes (" +
                    std::to_string(cap) + ")");
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

Gateway::Gateway(GatewayConfig config, Transport& transport)
    : config_(std::move(config)),
      transport_(transport),
      // Every peer may have up to a send queue's worth of messages on their way to us.
      mailbox_(static_cast<uint32_t>(config_.nodes.size()),
               config_.send_queue_bytes * std::max<size_t>(1, config_.nodes.size() - 1),
               config_.timeout * 2),
      engine_({config_.node_rank, static_cast<uint32_t>(config_.nodes.size()), config_.job_id,
               config_.timeout},
              transport_, mailbox_),
      connected_(config_.local_workers, false),
      data_volumes_(config_.local_workers, 0.0) {}

Gateway::~Gateway() { stop(); }

Status Gateway::start() {
  if (auto codec = place_codec(config_.codec, false, config_.collective,
                               static_cast<uint32_t>(config_.nodes.size()), 0);
      !codec.ok()) {
    return Status(codec.status().code(), "compression.codec: " + codec.status().message());
  }
  Transport::Handlers handlers;
  handlers.on_message = [this](uint32_t from, MessageBytes&& message) {
    Status filed = mailbox_.deliver(from, std::move(message));
    if (filed.ok()) return true;
    if (auto suppressed = refused_log_.admit(from)) {
      spdlog::warn("message from gateway {} refused: {} ({} more refused since the last line)",
                   from, filed.to_string(), *suppressed);
    }
    // Over the mailbox's cap, only the message's operation fails; anything else resets the link.
    return filed.code() == ErrorCode::kResourceExhausted;
  };
  handlers.on_peer = [this](uint32_t rank, bool up) {
    engine_.peer_changed(rank, up);
    spdlog::info("gateway {} {}", rank, up ? "connected" : "disconnected");
  };
  GRADGATE_RETURN_IF_ERROR(transport_.start(std::move(handlers)));
  watchdog_ = std::thread([this] { watch_local_waits(); });
  return {};
}

void Gateway::watch_local_waits() {
  std::vector<std::function<void()>> calls;
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    stopping_changed_.wait_for(lock, std::chrono::milliseconds(100));
    const auto now = std::chrono::steady_clock::now();
    for (auto& [id, tensor] : tensors_) {
      const auto asked = std::count_if(tensor.waiting.begin(), tensor.waiting.end(),
                                       [](const Done& done) { return done != nullptr; });
      if (tensor.running || asked == 0 || now - tensor.first_waiting < config_.timeout) continue;
      fail_next_step_locked(
          tensor,
          Status(ErrorCode::kTimeout, "only " + std::to_string(asked) + " of the " +
                                          std::to_string(tensor.waiting.size()) +
                                          " local workers asked for the all-reduce of \"" +
                                          tensor.spec.name + "\" within collective.timeout_ms"),
          calls);
    }
    lock.unlock();
    for (auto& call : calls) call();
    calls.clear();
    lock.lock();
  }
}

void Gateway::stop() {
  std::vector<std::function<void()>> calls;
  {
    std::unique_lock lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [id, tensor] : tensors_) {
      if (any_request(tensor.waiting)) {
        fail_next_step_locked(tensor, Status(ErrorCode::kAborted, "the gateway is stopping"),
                              calls);
      }
    }
  }
  stopping_changed_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  for (auto& call : calls) call();
  mailbox_.shutdown();
  {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [&] { return running_ == 0; });
  }
  transport_.stop();
}

Result<JobInfo> Gateway::on_worker_joined(uint32_t local_rank) {
  std::lock_guard lock(mutex_);
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
  ++stats_.workers;
  spdlog::info("local worker {} joined", local_rank);
  const auto nodes = static_cast<uint32_t>(config_.nodes.size());
  const auto timeout_ms = std::min<int64_t>(config_.timeout.count(), UINT32_MAX);
  return JobInfo{config_.node_rank, nodes, config_.local_workers, nodes * config_.local_workers,
                 static_cast<uint32_t>(timeout_ms)};
}

std::string Gateway::configured_codec(const TensorSpec& tensor) const {
  return dense_in_own_dtype(
      tensor, tensor.elements < config_.min_compress_elements ? "none" : config_.codec);
}

Result<TensorStreams> Gateway::make_streams_locked(const TensorSpec& spec, uint32_t id,
                                                   const kernels::Codec& codec, size_t in_use) {
  const auto nodes = static_cast<uint32_t>(config_.nodes.size());
  auto algorithm = choose_algorithm(codec, config_.collective, nodes, spec.elements);
  if (!algorithm.ok()) {
    return Status(algorithm.status().code(),
                  "tensor \"" + spec.name + "\": " + algorithm.status().message());
  }
  kernels::TensorDesc desc;
  desc.job_id = static_cast<uint32_t>(config_.job_id);
  desc.tensor_id = id;
  desc.elements = spec.elements;
  desc.rows = spec.rows;
  desc.cols = spec.cols;
  auto streams = make_tensor_streams(codec, desc, *algorithm, nodes, config_.node_rank,
                                     config_.segment_bytes / sizeof(float));
  if (!streams.ok()) {
    return Status(streams.status().code(),
                  "tensor \"" + spec.name + "\": " + streams.status().message());
  }
  if (in_use + streams->memory_bytes() > config_.residual_memory_cap_bytes) {
    return over_cap(spec.name, streams->memory_bytes(), in_use, config_.residual_memory_cap_bytes);
  }
  return streams;
}

Status Gateway::set_policy(CodecPolicy policy) {
  std::lock_guard lock(mutex_);
  for (const auto& [tensor, spec] : policy.codec_by_tensor) {
    if (auto params = kernels::parse_codec_spec(spec); !params.ok()) {
      return Status(params.status().code(), "policy version " + std::to_string(policy.version) +
                                                ", tensor \"" + tensor +
                                                "\": " + params.status().message());
    }
  }
  const uint32_t version = policy.version;
  const uint64_t step = policy.effective_step;
  uint32_t floor = version;  // no tensor will run a version older than its own
  for (const auto& [id, tensor] : tensors_) floor = std::min(floor, tensor.policy_version);
  if (policies_.add(std::move(policy), floor)) {
    stats_.policy_version = version;
    spdlog::info("policy version {} takes effect at step {}", version, step);
  }
  return {};
}

Result<Placement> Gateway::place_locked(const std::string& spec, const TensorSpec& tensor,
                                        DeviceTensor* device) {
  PlacementProber prober;
  if (device != nullptr) {
    prober = [&](const kernels::Codec& gpu, const kernels::Codec& cpu) {
      return probe_locked(gpu, cpu, tensor, *device);
    };
  }
  auto placed = place_codec(spec, device != nullptr, config_.collective,
                            static_cast<uint32_t>(config_.nodes.size()), tensor.elements,
                            config_.placement, prober);
  if (placed.ok() && !placed->probe_error.empty()) {
    spdlog::warn(
        "tensor \"{}\": the placement probe of codec {} failed, the codec runs on the "
        "GPU: {}",
        tensor.name, spec, placed->probe_error);
  }
  if (placed.ok() && device != nullptr && !placed->on_gpu) {
    spdlog::info("tensor \"{}\" in GPU memory: codec {} runs on the CPU: {}", tensor.name, spec,
                 placed->cpu_reason);
  }
  return placed;
}

Result<PlacementProbe> Gateway::probe_locked(const kernels::Codec& gpu, const kernels::Codec& cpu,
                                             const TensorSpec& tensor, DeviceTensor& device) {
  kernels::TensorDesc desc;
  desc.job_id = static_cast<uint32_t>(config_.job_id);
  desc.elements = tensor.elements;
  desc.rows = tensor.rows;
  desc.cols = tensor.cols;
  const ProbeKey key{gpu.spec(), device.device(), probe_sample(desc).elements};
  if (auto known = probes_.find(key); known != probes_.end()) return known->second.probe;
  auto measured = probe_placement(gpu, cpu, device.queue(), desc);
  if (!measured.ok()) return measured.status();
  spdlog::info(
      "placement probe of codec {} on GPU {} ({} values): {:.3g} elements/s on the GPU, "
      "{:.3g} on the CPU",
      gpu.spec(), device.device(), std::get<2>(key), measured->gpu_elements_per_second,
      measured->cpu_elements_per_second);
  probes_.emplace(key, PlacementRecord{kernels::codec_name(gpu.id()), device.device(),
                                       std::get<2>(key), *measured});
  return measured;
}

std::span<float> Gateway::step_data(Tensor& tensor, const WorkerBuffer& in_place) const {
  if (tensor.on_gpu) return tensor.device->sum();
  if (in_place.data != nullptr) {
    return {reinterpret_cast<float*>(in_place.data), tensor.spec.elements};
  }
  return tensor.node_sum;
}

Status Gateway::check_workers_locked(const Tensor& tensor) const {
  // A worker that left between asking and the gather took its gradient along (and one that came
  // back since holds a new buffer): the node's sum would miss it.
  for (uint32_t rank = 0; rank < tensor.in_flight.size(); ++rank) {
    if (!tensor.in_flight[rank]) {
      return Status(ErrorCode::kAborted, "local worker " + std::to_string(rank) +
                                             " left before the step of \"" + tensor.spec.name +
                                             "\" began");
    }
  }
  return {};
}

Status Gateway::gather(Tensor& tensor, const std::vector<WorkerBuffer>& buffers) {
  if (tensor.device) {
    GRADGATE_RETURN_IF_ERROR(tensor.device->reduce(buffers, tensor.spec.dtype));
    return tensor.on_gpu ? Status() : tensor.device->copy_sum_to_host(tensor.node_sum);
  }
  if (!tensor.node_sum.empty()) sum_worker_buffers(buffers, tensor.spec.dtype, tensor.node_sum);
  return {};
}

Status Gateway::write_back(Tensor& tensor, const std::vector<WorkerBuffer>& buffers,
                           std::unique_lock<std::mutex>& lock) {
  // Only to the workers still in the step: one that left and came back has a new buffer.
  std::vector<bool> to(buffers.size());
  for (size_t rank = 0; rank < to.size(); ++rank) to[rank] = tensor.in_flight[rank] != nullptr;
  lock.unlock();
  Status written;
  if (tensor.device) {
    if (!tensor.on_gpu) written = tensor.device->copy_sum_from_host(tensor.node_sum);
    if (written.ok()) written = tensor.device->write_back(buffers, to, tensor.spec.dtype);
  } else if (!tensor.node_sum.empty()) {
    for (size_t rank = 0; rank < buffers.size(); ++rank) {
      if (to[rank]) write_worker_buffer(tensor.node_sum, tensor.spec.dtype, buffers[rank]);
    }
  }
  lock.lock();
  return written;
}

AllreduceOp Gateway::op_of(Tensor& tensor, uint64_t seq, std::span<float> data) const {
  AllreduceOp op{tensor.id, seq, tensor.policy_version, data, tensor.codec.get(), &tensor.streams};
  op.held_policies = policies_.held();
  if (tensor.on_gpu) {
    op.memory = kernels::MemoryKind::kDevice;
    op.queue = &tensor.device->queue();
    op.host_codec = tensor.host_codec.get();
    op.frame_scratch = &tensor.device->frame_scratch();
  }
  return op;
}

Status Gateway::follow_policy_locked(Tensor& tensor, uint64_t seq, const WorkerBuffer& in_place) {
  const CodecPolicy* policy =
      tensor.held_by_all ? policies_.in_effect(seq, *tensor.held_by_all) : nullptr;
  // A peer ran a newer version of this tensor: its last step succeeded where ours failed.
  if (const CodecPolicy* peers = policies_.find(mailbox_.newest_peer_policy(tensor.id));
      peers != nullptr && (policy == nullptr || peers->version > policy->version)) {
    policy = peers;
  }
  if (policy == nullptr || policy->version <= tensor.policy_version) return {};
  const uint32_t version = policy->version;
  std::string wanted = configured_codec(tensor.spec);
  if (auto named = policy->codec_by_tensor.find(tensor.spec.name);
      named != policy->codec_by_tensor.end()) {
    wanted = dense_in_own_dtype(tensor.spec, named->second);
  }
  const bool gpu_buffers = tensor.device != nullptr;
  auto placed = place_locked(wanted, tensor.spec, tensor.device.get());
  if (!placed.ok()) return placed.status();
  const auto nodes = static_cast<uint32_t>(config_.nodes.size());
  if (auto algorithm =
          choose_algorithm(*placed->codec, config_.collective, nodes, tensor.spec.elements);
      !algorithm.ok()) {
    return keep_codec_locked(tensor, version, wanted, algorithm.status());
  }
  tensor.off_policy = false;
  if (placed->codec->spec() != tensor.codec->spec() || placed->on_gpu != tensor.on_gpu) {
    // Besides the new streams, the host node sum of the new placement (a tensor in GPU memory
    // takes it to or leaves it in host memory when its codec changes sides).
    const size_t in_use = stats_.residual_bytes - tensor.memory_bytes +
                          host_node_sum_bytes(tensor.spec, gpu_buffers, placed->on_gpu);
    if (placed->on_gpu) GRADGATE_RETURN_IF_ERROR(tensor.device->queue().make_current());
    auto streams = make_streams_locked(tensor.spec, tensor.id, *placed->codec, in_use);
    if (!streams.ok()) {
      return Status(streams.status().code(), "cannot follow policy version " +
                                                 std::to_string(version) + ": " +
                                                 streams.status().message());
    }
    // What error feedback still owes goes out with this step, from where the step's data is.
    if (tensor.on_gpu) {
      GRADGATE_RETURN_IF_ERROR(tensor.device->fold_residuals(tensor.streams, config_.node_rank));
    } else {
      fold_residuals(tensor.streams, config_.node_rank, step_data(tensor, in_place));
    }
    // A tensor in GPU memory whose codec moves between the GPU and the CPU takes its data along.
    if (gpu_buffers && placed->on_gpu && !tensor.on_gpu) {
      GRADGATE_RETURN_IF_ERROR(tensor.device->copy_sum_from_host(tensor.node_sum));
      std::vector<float>().swap(tensor.node_sum);
    } else if (gpu_buffers && !placed->on_gpu && tensor.on_gpu) {
      std::vector<float> host(tensor.spec.elements);  // the tensor keeps its state if this fails
      GRADGATE_RETURN_IF_ERROR(tensor.device->copy_sum_to_host(host));
      tensor.node_sum.swap(host);
    }
    adopt_streams_locked(tensor, std::move(streams).value());
    tensor.codec = std::move(placed->codec);
    tensor.host_codec = std::move(placed->host_codec);
    tensor.on_gpu = placed->on_gpu;
    spdlog::info("tensor \"{}\": codec {} ({}) on the {} from step {}, policy version {}",
                 tensor.spec.name, tensor.codec->spec(), algorithm_name(tensor.streams.algorithm),
                 tensor.on_gpu ? "GPU" : "CPU", seq, version);
  }
  tensor.policy_version = version;
  stats_.applied_policy_version = std::max(stats_.applied_policy_version, version);
  return {};
}

Status Gateway::keep_codec_locked(Tensor& tensor, uint32_t version, const std::string& wanted,
                                  const Status& why) {
  spdlog::warn(
      "tensor \"{}\" cannot follow policy version {} (codec {}): {}; it keeps codec {}, as every "
      "gateway of the same compression.collective does",
      tensor.spec.name, version, wanted, why.message(), tensor.codec->spec());
  tensor.off_policy = true;
  tensor.policy_version = version;
  stats_.applied_policy_version = std::max(stats_.applied_policy_version, version);
  return {};
}

size_t Gateway::host_node_sum_bytes(const TensorSpec& spec, bool gpu_buffers, bool on_gpu) const {
  const bool host_sum =
      gpu_buffers ? !on_gpu : !reduces_in_place(config_.local_workers, spec.dtype);
  return host_sum ? spec.elements * sizeof(float) : 0;
}

void Gateway::adopt_streams_locked(Tensor& tensor, TensorStreams streams) {
  const size_t memory = streams.memory_bytes() + tensor.node_sum.size() * sizeof(float);
  stats_.residual_bytes = stats_.residual_bytes - tensor.memory_bytes + memory;
  tensor.memory_bytes = memory;
  tensor.streams = std::move(streams);
}

void Gateway::restart_after_skip_locked(Tensor& tensor, uint64_t seq) {
  if (tensor.skips_seen == skips_ || seq <= last_skipped_seq_) return;
  tensor.skips_seen = skips_;
  if (tensor.streams.memory_bytes() == 0) return;  // no residual, no codec state
  const size_t old_bytes = tensor.memory_bytes - tensor.node_sum.size() * sizeof(float);
  const Status current = tensor.on_gpu ? tensor.device->queue().make_current() : Status{};
  Result<TensorStreams> streams = current.ok()
                                      ? make_streams_locked(tensor.spec, tensor.id, *tensor.codec,
                                                            stats_.residual_bytes - old_bytes)
                                      : Result<TensorStreams>(current);
  if (!streams.ok()) {
    spdlog::warn("tensor \"{}\": step {} was skipped, its error feedback goes on: {}",
                 tensor.spec.name, last_skipped_seq_, streams.status().to_string());
    return;
  }
  adopt_streams_locked(tensor, std::move(streams).value());
  spdlog::info(
      "tensor \"{}\": step {} was skipped for a non-finite gradient; its error feedback starts "
      "afresh at step {}",
      tensor.spec.name, last_skipped_seq_, seq);
}

Status Gateway::check_spec(const TensorSpec& spec) const {
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

Result<uint32_t> Gateway::on_declare(uint32_t local_rank, const TensorSpec& spec,
                                     WorkerBuffer buffer) {
  GRADGATE_RETURN_IF_ERROR(check_spec(spec));
  const uint32_t id = tensor_id_of(spec.name);
  std::lock_guard lock(mutex_);
  if (local_rank >= connected_.size() || !connected_[local_rank]) {
    return Status(ErrorCode::kInvalidArgument, "declare before hello");
  }
  if (std::isfinite(spec.data_volume) && spec.data_volume > data_volumes_[local_rank]) {
    data_volumes_[local_rank] = spec.data_volume;
  }
  auto found = tensors_.find(id);
  if (found != tensors_.end()) {
    const TensorSpec& known = found->second.spec;
    if (known.name != spec.name) {
      return Status(ErrorCode::kInvalidArgument, "tensor \"" + spec.name +
                                                     "\" has the same id as \"" + known.name +
                                                     "\"; rename one of them");
    }
    if (known.elements != spec.elements || known.dtype != spec.dtype || known.rows != spec.rows ||
        known.cols != spec.cols) {
      return Status(ErrorCode::kInvalidArgument,
                    "tensor \"" + spec.name +
                        "\" was declared with another size, dtype or shape "
                        "by another worker of this node");
    }
    if ((buffer.memory == kernels::MemoryKind::kDevice) != (found->second.device != nullptr)) {
      return Status(ErrorCode::kInvalidArgument,
                    "tensor \"" + spec.name + "\": local worker " + std::to_string(local_rank) +
                        "'s buffer is in " + memory_name(buffer.memory) +
                        " memory, the other local workers' are not: a node's workers must "
                        "agree");
    }
    if (found->second.has_request(local_rank)) {
      return Status(ErrorCode::kInvalidArgument,
                    "tensor \"" + spec.name + "\" is declared again by local worker " +
                        std::to_string(local_rank) + " while its all-reduce runs");
    }
    found->second.buffers[local_rank] = buffer;  // a worker's buffer moved: the next step uses it
    found->second.departed[local_rank] = false;  // or a restarted worker came back
    return id;
  }

  try {
    return add_tensor_locked(local_rank, spec, id, std::move(buffer));
  } catch (const std::bad_alloc&) {  // the cap allows more than the machine has: refuse, go on
    return Status(ErrorCode::kResourceExhausted,
                  "tensor \"" + spec.name + "\": out of memory for its node sum and streams (" +
                      std::to_string(spec.elements) + " elements)");
  }
}

Result<uint32_t> Gateway::add_tensor_locked(uint32_t local_rank, const TensorSpec& spec,
                                            uint32_t id, WorkerBuffer buffer) {
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
  auto placed = place_locked(configured_codec(spec), spec, device.get());
  if (!placed.ok()) return placed.status();
  const size_t node_sum_bytes = host_node_sum_bytes(spec, gpu_buffers, placed->on_gpu);
  if (stats_.residual_bytes + node_sum_bytes > config_.residual_memory_cap_bytes) {
    return over_cap(spec.name, node_sum_bytes, stats_.residual_bytes,
                    config_.residual_memory_cap_bytes);
  }
  if (placed->on_gpu) GRADGATE_RETURN_IF_ERROR(device->queue().make_current());  // streams' GPU
  auto streams =
      make_streams_locked(spec, id, *placed->codec, stats_.residual_bytes + node_sum_bytes);
  if (!streams.ok()) return streams.status();
  const size_t memory = streams->memory_bytes() + node_sum_bytes;
  Tensor tensor;
  tensor.spec = spec;
  tensor.id = id;
  tensor.codec = std::move(placed->codec);
  tensor.host_codec = std::move(placed->host_codec);
  tensor.on_gpu = placed->on_gpu;
  tensor.device = std::move(device);
  tensor.streams = std::move(streams).value();
  tensor.buffers.assign(config_.local_workers, WorkerBuffer{});
  tensor.buffers[local_rank] = buffer;
  tensor.waiting.resize(config_.local_workers);
  tensor.in_flight.resize(config_.local_workers);
  tensor.departed.resize(config_.local_workers);
  tensor.node_sum.resize(node_sum_bytes / sizeof(float));
  tensor.memory_bytes = memory;
  tensor.skips_seen = skips_;
  stats_.residual_bytes += memory;
  ++stats_.tensors;
  spdlog::debug("tensor \"{}\" (id {}): {} elements, codec {} on the {}, {}", spec.name, id,
                spec.elements, tensor.codec->spec(), tensor.on_gpu ? "GPU" : "CPU",
                algorithm_name(tensor.streams.algorithm));
  tensors_.emplace(id, std::move(tensor));
  return id;
}

void Gateway::on_allreduce(uint32_t local_rank, uint32_t key, Done done) {
  std::unique_lock lock(mutex_);
  auto found = tensors_.find(key);
  Status refused;
  if (stopping_) {
    refused = Status(ErrorCode::kAborted, "the gateway is stopping");
  } else if (found == tensors_.end() || local_rank >= found->second.buffers.size() ||
             found->second.buffers[local_rank].data == nullptr) {
    refused = Status(ErrorCode::kNotFound, "tensor key " + std::to_string(key) +
                                               " is not declared by local worker " +
                                               std::to_string(local_rank));
  } else if (found->second.has_request(local_rank)) {
    refused = Status(ErrorCode::kInvalidArgument,
                     "tensor \"" + found->second.spec.name +
                         "\" already has an all-reduce in flight for this worker");
  }
  if (!refused.ok()) {
    lock.unlock();
    done(AllreduceOutcome{refused});
    return;
  }
  Tensor& tensor = found->second;
  if (!any_request(tensor.waiting)) {
    tensor.first_waiting = std::chrono::steady_clock::now();
  }
  tensor.waiting[local_rank] = std::move(done);
  if (all_requested(tensor.waiting)) {
    tensor.waiting_spread = std::chrono::steady_clock::now() - tensor.first_waiting;
  }
  std::vector<std::function<void()>> calls;
  if (const auto gone = std::find(tensor.departed.begin(), tensor.departed.end(), true);
      gone != tensor.departed.end()) {
    fail_next_step_locked(
        tensor,
        Status(ErrorCode::kAborted,
               "local worker " + std::to_string(gone - tensor.departed.begin()) +
                   " left or released \"" + tensor.spec.name + "\": no step of it can complete"),
        calls);
  } else {
    start_if_ready_locked(tensor, calls);
  }
  lock.unlock();
  for (auto& call : calls) call();
}

void Gateway::start_if_ready_locked(Tensor& tensor, std::vector<std::function<void()>>& calls) {
  if (tensor.running || stopping_ || !all_requested(tensor.waiting)) return;
  tensor.in_flight.swap(tensor.waiting);
  tensor.in_flight_spread = tensor.waiting_spread;
  tensor.running = true;
  ++running_;
  const uint64_t seq = tensor.next_seq++;
  try {
    step_threads_.run([this, id = tensor.id, seq] { run(id, seq); });
  } catch (const std::system_error& error) {
    tensor.running = false;
    --running_;
    tensor.waiting.swap(tensor.in_flight);
    tensor.next_seq = seq;
    fail_next_step_locked(tensor,
                          Status(ErrorCode::kResourceExhausted,
                                 std::string("cannot start the all-reduce: ") + error.what()),
                          calls);
  }
}

void Gateway::run(uint32_t id, uint64_t seq) {
  std::unique_lock lock(mutex_);
  Tensor& tensor = tensors_.at(id);  // not released while running
  // The step's buffers, copied with their mappings: the gather and the write-back run without the
  // lock, and a worker that leaves meanwhile does not pull its buffer from under them or from
  // under an all-reduce in place.
  const std::vector<WorkerBuffer> buffers = tensor.buffers;
  const WorkerBuffer in_place =
      !tensor.device && tensor.node_sum.empty() ? buffers[0] : WorkerBuffer{};
  Status prepared = check_workers_locked(tensor);
  if (prepared.ok()) {
    lock.unlock();  // waits for the workers' GPUs, sums large buffers
    prepared = gather(tensor, buffers);
    lock.lock();
  }
  if (prepared.ok()) {
    try {
      restart_after_skip_locked(tensor, seq);
      prepared = follow_policy_locked(tensor, seq, in_place);
    } catch (const std::exception& error) {  // bad_alloc making new streams: fail the step
      prepared =
          Status(ErrorCode::kResourceExhausted, std::string("preparing the step: ") + error.what());
    }
  }
  Result<AllreduceReport> report = Status(ErrorCode::kInternal, "no result");
  if (!prepared.ok()) {
    report = prepared;
    engine_.abort(op_of(tensor, seq, step_data(tensor, in_place)), prepared);
  } else {
    const AllreduceOp op = op_of(tensor, seq, step_data(tensor, in_place));
    lock.unlock();
    try {
      report = engine_.allreduce(op);
    } catch (const std::exception& error) {  // bad_alloc: fail the step, keep the daemon
      report = Status(ErrorCode::kResourceExhausted, std::string("all-reduce: ") + error.what());
    }
    lock.lock();
    if (report.ok()) {
      if (Status written = write_back(tensor, buffers, lock); !written.ok()) report = written;
    }
  }
  finish(tensor, report, seq, lock);
}

void Gateway::finish(Tensor& tensor, const Result<AllreduceReport>& report, uint64_t seq,
                     std::unique_lock<std::mutex>& lock) {
  if (report.ok()) {
    ++stats_.allreduces;
    stats_.raw_bytes += raw_bytes(tensor.spec);
    stats_.wire_bytes += report->wire_bytes;
    stats_.union_elements += report->union_elements;
  } else {
    ++stats_.allreduce_errors;
    spdlog::warn("tensor \"{}\": {}", tensor.spec.name, report.status().to_string());
    if (report.status().code() == ErrorCode::kNonFiniteGradient) {
      ++skips_;
      last_skipped_seq_ = seq;
    }
  }
  // Failed, or a later step already failed here while this one ran (fail_next_step_locked): the
  // gateways may disagree on what they held, as after a failure on every gateway.
  const bool later_failed = tensor.next_seq > seq + 1;
  tensor.held_by_all =
      report.ok() && !later_failed ? std::optional(report->held_by_all) : std::nullopt;
  const AllreduceOutcome outcome =
      outcome_of(report, seq, raw_bytes(tensor.spec), tensor.codec->id());
  StepRecord record{outcome.status,
                    seq,
                    tensor.policy_version,
                    kernels::codec_name(outcome.codec),
                    outcome.raw_bytes,
                    tensor.spec.elements * sizeof(float),
                    outcome.wire_bytes,
                    outcome.encode_seconds,
                    outcome.communicate_seconds,
                    outcome.decode_seconds,
                    report.ok() ? report->union_elements : 0,
                    tensor.on_gpu ? "gpu" : "cpu",
                    tensor.in_flight_spread.count()};
  std::vector<Done> done;
  for (auto& in_flight : tensor.in_flight) {
    if (in_flight) done.push_back(std::exchange(in_flight, nullptr));
  }
  tensor.running = false;
  const uint32_t id = tensor.id;
  lock.unlock();
  for (auto& call : done) call(outcome);
  if (step_observer_) step_observer_(record);
  lock.lock();
  std::vector<std::function<void()>> calls;
  release_if_unused_locked(id);
  if (auto found = tensors_.find(id); found != tensors_.end()) {
    start_if_ready_locked(found->second, calls);  // the next step may be waiting already
  }
  lock.unlock();
  for (auto& call : calls) call();
  lock.lock();
  --running_;  // last: stop() returns only after every completion of this step was made
  idle_.notify_all();
}

void Gateway::fail_next_step_locked(Tensor& tensor, const Status& why,
                                    std::vector<std::function<void()>>& calls) {
  const uint64_t seq = tensor.next_seq++;
  // As the peers that fail this step forget what every gateway held (finish()); a step running
  // meanwhile forgets it as it ends.
  if (!tensor.running) tensor.held_by_all.reset();
  for (auto& waiting : tensor.waiting) {
    if (!waiting) continue;
    calls.push_back([done = std::exchange(waiting, nullptr), why, seq] {
      AllreduceOutcome outcome;
      outcome.status = why;
      outcome.step = seq;
      done(outcome);
    });
  }
  const AllreduceOp op = op_of(tensor, seq, {});
  // While the step before runs, what its peers sent for it must stay filed.
  if (tensor.running) {
    engine_.tell_abort(op, why);
  } else {
    engine_.abort(op, why);
  }
}

void Gateway::on_worker_left(uint32_t local_rank) {
  std::vector<std::function<void()>> calls;
  {
    std::lock_guard lock(mutex_);
    if (local_rank >= connected_.size() || !connected_[local_rank]) return;
    connected_[local_rank] = false;
    --stats_.workers;
    spdlog::info("local worker {} left", local_rank);
    std::vector<uint32_t> ids;
    for (auto& [id, tensor] : tensors_) {
      detach_worker_locked(tensor, local_rank,
                           "local worker " + std::to_string(local_rank) +
                               " left before taking part in the all-reduce of \"" +
                               tensor.spec.name + "\"",
                           calls);
      ids.push_back(id);
    }
    for (uint32_t id : ids) release_if_unused_locked(id);
  }
  for (auto& call : calls) call();
}

void Gateway::on_release(uint32_t local_rank, uint32_t key) {
  std::vector<std::function<void()>> calls;
  {
    std::lock_guard lock(mutex_);
    const auto found = tensors_.find(key);
    if (found == tensors_.end() || local_rank >= found->second.buffers.size()) return;
    Tensor& tensor = found->second;
    spdlog::debug("tensor \"{}\": released by local worker {}", tensor.spec.name, local_rank);
    detach_worker_locked(tensor, local_rank,
                         "local worker " + std::to_string(local_rank) + " released \"" +
                             tensor.spec.name + "\" while the others asked for its all-reduce",
                         calls);
    release_if_unused_locked(key);
  }
  for (auto& call : calls) call();
}

void Gateway::detach_worker_locked(Tensor& tensor, uint32_t local_rank, const std::string& why,
                                   std::vector<std::function<void()>>& calls) {
  const bool asked = any_request(tensor.waiting);
  if (tensor.buffers[local_rank].data != nullptr) tensor.departed[local_rank] = true;
  tensor.buffers[local_rank] = WorkerBuffer{};
  // Its session is gone, or it has no request: nobody to tell.
  tensor.waiting[local_rank] = nullptr;
  tensor.in_flight[local_rank] = nullptr;
  if (asked) fail_next_step_locked(tensor, Status(ErrorCode::kAborted, why), calls);
}

void Gateway::release_if_unused_locked(uint32_t id) {
  auto found = tensors_.find(id);
  if (found == tensors_.end() || found->second.running) return;
  for (const WorkerBuffer& buffer : found->second.buffers) {
    if (buffer.data != nullptr) return;
  }
  stats_.residual_bytes -= found->second.memory_bytes;
  --stats_.tensors;
  mailbox_.forget_tensor(id);
  tensors_.erase(found);
}

GatewayStats Gateway::stats() const {
  std::lock_guard lock(mutex_);
  GatewayStats stats = stats_;
  stats.step_threads = step_threads_.threads();
  for (const auto& [id, tensor] : tensors_) {
    stats.tensors_off_policy += tensor.off_policy ? 1 : 0;
    if (!tensor.device) continue;
    ++(tensor.on_gpu ? stats.gpu_tensors_on_gpu : stats.gpu_tensors_on_cpu);
  }
  return stats;
}

std::vector<PlacementRecord> Gateway::placement_probes() const {
  std::lock_guard lock(mutex_);
  std::vector<PlacementRecord> records;
  for (const auto& [key, record] : probes_) records.push_back(record);
  return records;
}

std::vector<TensorInfo> Gateway::tensors() const {
  std::lock_guard lock(mutex_);
  std::vector<TensorInfo> infos;
  for (const auto& [id, tensor] : tensors_) {
    infos.push_back({tensor.spec.name, tensor.spec.elements, tensor.spec.rows, tensor.spec.cols,
                     tensor.spec.dtype, tensor.codec->spec(), tensor.next_seq});
  }
  return infos;
}

std::vector<double> Gateway::worker_data_volumes() const {
  std::lock_guard lock(mutex_);
  return data_volumes_;
}

void Gateway::set_step_observer(std::function<void(const StepRecord&)> observer) {
  step_observer_ = std::move(observer);
}

}  // namespace gradgate::gateway
