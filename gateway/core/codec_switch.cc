#include "gateway/core/codec_switch.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "gradgate/kernels/codec_spec.h"

namespace gradgate::gateway {

Status CodecSwitch::add_policy(CodecPolicy policy) {
  for (const auto& [tensor, spec] : policy.codec_by_tensor) {
    if (auto params = kernels::parse_codec_spec(spec); !params.ok()) {
      return Status(params.status().code(), "policy version " + std::to_string(policy.version) +
                                                ", tensor \"" + tensor +
                                                "\": " + params.status().message());
    }
  }
  const uint32_t version = policy.version;
  const uint64_t step = policy.effective_step;
  // No tensor will run a version older than its own.
  if (agreement_.add(std::move(policy), table_.oldest_version(version))) {
    spdlog::info("policy version {} takes effect at step {}", version, step);
  }
  return {};
}

Status CodecSwitch::follow(Tensor& tensor, uint64_t step, const WorkerBuffer& in_place) {
  const CodecPolicy* policy =
      agreement_.due(tensor.policy, step, mailbox_.newest_peer_policy(tensor.id));
  if (policy == nullptr) return {};
  const uint32_t version = policy->version;
  std::string wanted = codecs_.configured(tensor.spec);
  if (auto named = policy->codec_by_tensor.find(tensor.spec.name);
      named != policy->codec_by_tensor.end()) {
    wanted = codecs_.for_tensor(tensor.spec, named->second);
  }
  auto placed = codecs_.place(wanted, tensor.spec, tensor.device.get());
  if (!placed.ok()) return placed.status();
  if (auto algorithm = codecs_.algorithm(*placed->codec, tensor.spec); !algorithm.ok()) {
    keep_codec(tensor, version, wanted, algorithm.status());
    return {};
  }
  if (placed->codec->spec() != tensor.codec->spec() || placed->on_gpu != tensor.on_gpu) {
    GRADGATE_RETURN_IF_ERROR(
        switch_codec(tensor, std::move(placed).value(), step, version, in_place));
  }
  agreement_.applied(tensor.policy, version, false);
  return {};
}

Status CodecSwitch::switch_codec(Tensor& tensor, Placement placed, uint64_t step, uint32_t version,
                                 const WorkerBuffer& in_place) {
  const bool gpu_buffers = tensor.device != nullptr;
  // Besides the new streams, the host node sum of the new placement (a tensor in GPU memory
  // takes it to or leaves it in host memory when its codec changes sides).
  const size_t in_use = table_.memory_bytes() - tensor.memory_bytes +
                        codecs_.host_node_sum_bytes(tensor.spec, gpu_buffers, placed.on_gpu);
  if (placed.on_gpu) GRADGATE_RETURN_IF_ERROR(tensor.device->queue().make_current());
  auto streams = codecs_.make_streams(tensor.spec, tensor.id, *placed.codec, in_use);
  if (!streams.ok()) {
    return Status(streams.status().code(), "cannot follow policy version " +
                                               std::to_string(version) + ": " +
                                               streams.status().message());
  }
  const uint32_t node_rank = codecs_.job().node_rank;
  // What error feedback still owes goes out with this step, from where the step's data is.
  if (tensor.on_gpu) {
    GRADGATE_RETURN_IF_ERROR(tensor.device->fold_residuals(tensor.streams, node_rank));
  } else {
    fold_residuals(tensor.streams, node_rank, tensor.step_data(in_place));
  }
  // A tensor in GPU memory whose codec moves between the GPU and the CPU takes its data along.
  if (gpu_buffers && placed.on_gpu && !tensor.on_gpu) {
    GRADGATE_RETURN_IF_ERROR(tensor.device->copy_sum_from_host(tensor.node_sum));
    std::vector<float>().swap(tensor.node_sum);
  } else if (gpu_buffers && !placed.on_gpu && tensor.on_gpu) {
    std::vector<float> host(tensor.spec.elements);  // the tensor keeps its state if this fails
    GRADGATE_RETURN_IF_ERROR(tensor.device->copy_sum_to_host(host));
    tensor.node_sum.swap(host);
  }
  table_.adopt_streams(tensor, std::move(streams).value());
  tensor.codec = std::move(placed.codec);
  tensor.host_codec = std::move(placed.host_codec);
  tensor.on_gpu = placed.on_gpu;
  spdlog::info("tensor \"{}\": codec {} ({}) on the {} from step {}, policy version {}",
               tensor.spec.name, tensor.codec->spec(), algorithm_name(tensor.streams.algorithm),
               tensor.on_gpu ? "GPU" : "CPU", step, version);
  return {};
}

void CodecSwitch::keep_codec(Tensor& tensor, uint32_t version, const std::string& wanted,
                             const Status& why) {
  spdlog::warn(
      "tensor \"{}\" cannot follow policy version {} (codec {}): {}; it keeps codec {}, as every "
      "gateway of the same compression.collective does",
      tensor.spec.name, version, wanted, why.message(), tensor.codec->spec());
  agreement_.applied(tensor.policy, version, true);
}

void CodecSwitch::step_ended(Tensor& tensor, const Result<AllreduceReport>& report,
                             bool later_failed) {
  SwitchAgreement::step_ended(
      tensor.policy, report.ok() && !later_failed ? std::optional(report->stamp) : std::nullopt);
}

void CodecSwitch::step_failed(Tensor& tensor) {
  SwitchAgreement::step_failed(tensor.policy, tensor.barrier.running());
}

}  // namespace gradgate::gateway
