// The tensors of the node's workers, by id: what each declared (the same name, size, dtype and
// shape on every local worker), its buffers, its codec with its streams (error-feedback
// residuals) and node sum, all under the memory cap (streams.residual_memory_cap_bytes). A tensor
// is released when no local worker holds a buffer of it and no step of it runs. Not thread-safe:
// the step runner guards it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gateway/agreement/switch_agreement.h"
#include "gateway/collective/tensor_streams.h"
#include "gateway/core/local_barrier.h"
#include "gateway/core/tensor_codecs.h"
#include "gateway/gpu/device_tensor.h"
#include "gateway/ingress/ingress.h"
#include "gradgate/kernels/codec.h"

namespace gradgate::gateway {

/// The stable id of a tensor name on the wire (FNV-1a, 32 bits).
uint32_t tensor_id_of(const std::string& name);

/// A declared tensor, for telemetry and the admin API.
struct TensorInfo {
  std::string name;
  uint64_t elements = 0, rows = 0, cols = 0;
  Dtype dtype = Dtype::kFp32;
  std::string codec;  // its codec spec now
  uint64_t steps = 0;
};

struct Tensor {
  Tensor(const TensorSpec& tensor_spec, uint32_t tensor_id, uint32_t local_workers)
      : spec(tensor_spec), id(tensor_id), buffers(local_workers), barrier(local_workers) {}

  TensorSpec spec;
  uint32_t id = 0;
  std::vector<WorkerBuffer> buffers;  // by local rank; data == nullptr: not declared (any more)
  LocalBarrier barrier;
  std::unique_ptr<kernels::Codec> codec;
  /// Buffers in GPU memory: the node sum is made there and the aggregate written back from
  /// there (null for buffers in host memory). With on_gpu the codec runs there too (`codec` a
  /// CUDA codec, `host_codec` its CPU twin for frame sums); otherwise on node_sum, a copy.
  std::unique_ptr<DeviceTensor> device;
  bool on_gpu = false;
  std::unique_ptr<kernels::Codec> host_codec;
  TensorStreams streams;
  /// Several local workers or 16-bit gradients: the node's fp32 sum, reduced into and written
  /// back from. Empty when the only local worker's fp32 buffer is reduced in place, and for
  /// buffers in GPU memory whose codec runs on the GPU.
  std::vector<float> node_sum;
  size_t memory_bytes = 0;  // streams and node sum, as counted against the cap
  TensorAgreement policy;   // which policy it runs under (gateway/agreement)
  uint64_t skips_seen = 0;  // skipped steps (TensorTable) when its streams were last made

  /// The only worker's buffer when the step's collective works in it, else none.
  WorkerBuffer in_place(const std::vector<WorkerBuffer>& step_buffers) const;
  /// Where the step's collective runs: the GPU sum, node_sum, or the `in_place` buffer.
  std::span<float> step_data(const WorkerBuffer& in_place);
};

class TensorTable {
 public:
  explicit TensorTable(TensorCodecs& codecs) : codecs_(codecs) {}

  /// kInvalidArgument for a size or shape no tensor can have.
  static Status check_spec(const TensorSpec& spec);
  /// Local worker `local_rank` declares `spec` (which passed check_spec) with its buffer: a
  /// tensor the node's other workers declared alike, or a new one with its codec (placed), streams
  /// and node sum within the memory cap. Its id, or why not.
  Result<uint32_t> declare(uint32_t local_rank, const TensorSpec& spec, WorkerBuffer buffer);
  Tensor* find(uint32_t id);
  /// Releases tensor `id` if no local worker holds a buffer of it and no step of it runs.
  bool release_if_unused(uint32_t id);
  /// `streams` become the tensor's, counted against the cap in place of its old ones.
  void adopt_streams(Tensor& tensor, TensorStreams streams);
  /// A step of some tensor was skipped for a non-finite gradient.
  void step_skipped(uint64_t step);
  /// Before step `step` of `tensor`: when a step of any tensor was skipped since the tensor's
  /// streams were made, and `step` comes after it, its streams are made afresh (no residual, no
  /// codec state). The loss scaler drops that whole training step, so nothing of its gradients,
  /// scaled by a loss scale too high, nor of residuals built under that scale reaches later
  /// steps: not in the tensor that was skipped, nor in the other buckets of that step, which
  /// completed. Every gateway skips the same step, so every one starts afresh; where new streams
  /// cannot be made the old ones stay (logged).
  void restart_after_skip(Tensor& tensor, uint64_t step);

  std::map<uint32_t, Tensor>& all() { return tensors_; }
  const std::map<uint32_t, Tensor>& all() const { return tensors_; }
  /// Bytes of streams and node sums, counted against the cap.
  size_t memory_bytes() const { return memory_bytes_; }
  /// The oldest policy version a tensor runs under, at most `version`.
  uint32_t oldest_version(uint32_t version) const;
  std::vector<TensorInfo> infos() const;

 private:
  Status check_known(const Tensor& known, uint32_t local_rank, const TensorSpec& spec,
                     const WorkerBuffer& buffer) const;
  /// Throws std::bad_alloc when the machine has less memory than the cap allows.
  Result<uint32_t> add(uint32_t local_rank, const TensorSpec& spec, uint32_t id,
                       WorkerBuffer buffer);

  TensorCodecs& codecs_;
  std::map<uint32_t, Tensor> tensors_;
  size_t memory_bytes_ = 0;
  // Steps skipped for a non-finite gradient (any tensor), and the number of the last.
  uint64_t skips_ = 0;
  uint64_t last_skipped_step_ = 0;
};

}  // namespace gradgate::gateway
