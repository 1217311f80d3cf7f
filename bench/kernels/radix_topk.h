// The sort-based top-k that a selection should beat: CUB's radix sort of every |v| (as float bits,
// which order like the non-negative values) with its index, descending; the first k pairs are the
// k largest |v| and where they are. Owns its device buffers, sized for one n. Host-only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "device_memory.h"
#include "gradgate/base/status.h"

namespace gradgate::bench {

class RadixTopk {
 public:
  /// The buffers for tensors of `n` elements.
  static Result<std::unique_ptr<RadixTopk>> make(size_t n);

  /// Enqueues on `stream` the sort of the |v| of `v` (n device values) with their indices: the
  /// first k sorted pairs are the top k, for any k.
  Status run(const float* v, cudaStream_t stream);

 private:
  RadixTopk() = default;

  size_t n_ = 0;
  kernels::cuda::DevicePtr<uint32_t> keys_in_, keys_out_, indices_in_, indices_out_;
  kernels::cuda::DevicePtr<std::byte> temporary_;
  size_t temporary_bytes_ = 0;
};

}  // namespace gradgate::bench
