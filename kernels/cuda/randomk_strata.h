// The random-k selection of kernels/cpu/randomk_codec.cc as host-device functions, so that the GPU
// picks the same elements as the CPU and frames match byte for byte: the tensor is cut into k
// equal strata [floor(j n / k), floor((j + 1) n / k)) and stratum j gives the element at a
// Philox-uniform offset, keyed by a selection key that every worker derives alike.
//
// Pure functions of their arguments: safe anywhere.
#pragma once

#include <cstdint>

#include "gradgate/kernels/philox.h"

namespace gradgate::kernels::cuda::randomk {

/// The selection key of one tensor and step of a job.
GRADGATE_HOST_DEVICE inline uint64_t selection_key(uint64_t job_seed, uint32_t tensor_id,
                                                   uint64_t step) {
  return mix64(job_seed ^ mix64(static_cast<uint64_t>(tensor_id) << 32 ^ step));
}

/// The element chosen in stratum j of k over n elements.
GRADGATE_HOST_DEVICE inline uint32_t stratum_index(uint64_t j, uint64_t k, uint64_t n,
                                                   uint64_t key) {
  const uint64_t begin = j * n / k;
  const uint64_t length = (j + 1) * n / k - begin;
  const Philox4 bits =
      philox4x32({{static_cast<uint32_t>(j), static_cast<uint32_t>(j >> 32), 0x7A4Bu, 0}},
                 static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32));
  return static_cast<uint32_t>(begin + ((static_cast<uint64_t>(bits.v[0]) * length) >> 32));
}

}  // namespace gradgate::kernels::cuda::randomk
