// Host-side entry points of the kernels the sparse codecs (topk, randomk) share: error feedback
// without a dense frame, the checksum of a payload written out of order, and the checks and
// scatter of (index, value) pairs into a dense output. Each enqueues its kernels on `stream` and
// returns the launch's Status; tallies arrive in the Tally once the stream has synchronised.
// Host-only: compiles without nvcc.
//
// Wire values are fp32 or (`fp16`) IEEE half, little-endian, at any byte alignment.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "launch.h"

namespace gradgate::kernels::cuda {

/// e += g where the sum is finite (e keeps its value elsewhere), counting the rest in count[0].
Status launch_accumulate(const float* g, float* e, uint64_t n, Tally* tally, cudaStream_t stream);
/// Undoes launch_accumulate after a failed encode: e -= g where that is finite.
Status launch_unaccumulate(const float* g, float* e, uint64_t n, cudaStream_t stream);

/// Folds bytes [offset, offset + bytes) of a frame's body (`body` 4-byte aligned, offset a
/// multiple of 4), already written, into the frame's CRC field (see CrcSink).
Status launch_body_crc(const std::byte* body, uint64_t offset, uint64_t bytes, const CrcSink& sink,
                       cudaStream_t stream);

/// Counts the NaN and infinite values among `count` wire values in count[0].
Status launch_count_nonfinite_values(const std::byte* values, uint64_t count, bool fp16,
                                     Tally* tally, cudaStream_t stream);
/// out[index[j]] += value j, for distinct in-range indices.
Status launch_scatter_add(const uint32_t* index, const std::byte* values, uint64_t count, bool fp16,
                          float* out, cudaStream_t stream);

/// Copies `bytes` of device memory into host memory, synchronously on `stream`.
Status read_device(void* host, const void* device, size_t bytes, cudaStream_t stream);

}  // namespace gradgate::kernels::cuda
