// Host-side entry points of the CUDA kernels (the .cu files define them): each enqueues its
// kernels on `stream` and returns the launch's Status; results arrive in device memory and in the
// Tally, which the caller reads once the stream has synchronised. Host-only: compiles without nvcc.
//
// Element counts are those of the dense tensor (1 .. 2^32 - 1). Pointers are device memory; frame
// payloads and outputs must be 4-byte aligned (the CUDA codecs check this).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gradgate/base/status.h"
#include "gradgate/kernels/crc32c_combine.h"
#include "gradgate/kernels/element_rules.h"
#include "gradgate/kernels/frame.h"

namespace gradgate::kernels::cuda {

/// What the kernels of one operation tally for the host: zeroed before it, read after it.
struct Tally {
  /// Bad values (NaN or infinite) found in input 0, input 1 and in the output.
  unsigned long long count[3];
  /// Per input: the largest |level| (qsgd), or the float bits of the largest kept |v|.
  unsigned int max[2];
  /// Words copied out of frames for the host's checks (scales, the last byte of a sign bitmap).
  unsigned int word[2];
  /// The |v| sum in the order of rules::kSumBlock (sign's scale).
  double sum;
};

/// The table behind the CRC shifts, in the current device's memory.
Result<const Crc32cZeros*> device_crc32c_zeros();

/// Where a kernel that writes a frame's payload folds the CRC32C of the part it writes (the
/// body: the payload after the prefix that launch_seal_header writes).
struct CrcSink {
  uint32_t* slot;  // the frame's CRC field (offset 44), seeded by launch_seal_header
  uint64_t body_bytes;
  const Crc32cZeros* zeros;
};

/// The bytes between the header and the body: qsgd's and sign's 4-byte scale, taken from
/// `from` (device memory) when it is set, else `value`.
struct Prefix {
  uint32_t bytes = 0;
  uint32_t value = 0;
  const void* from = nullptr;
};

/// Writes `header` and `prefix` into frame[0, 48 + prefix.bytes) and seeds the CRC field so that,
/// once the body kernels have folded the body into it, it holds the frame's CRC32C.
Status launch_seal_header(std::byte* frame, const FrameHeader& header, const Prefix& prefix,
                          cudaStream_t stream);

// ---- none: out = a (+ b); bad values of a, b and a + b in count[0], count[1], count[2] ---------
Status launch_none_write(const float* a, const float* b, float* out, uint64_t n,
                         const CrcSink& sink, Tally* tally, cudaStream_t stream);
/// overwrite: out = in, counting bad values in count[0]; else out += in.
Status launch_none_decode(const float* in, float* out, uint64_t n, bool overwrite, Tally* tally,
                          cudaStream_t stream);
Status launch_count_nonfinite(const float* in, uint64_t n, Tally* tally, cudaStream_t stream);

// ---- fp16, bf16 ---------------------------------------------------------------------------------
enum class HalfFormat : uint8_t { kFp16, kBf16 };
/// Encodes g (+ e, which keeps the rounding error), counting bad v in count[0].
Status launch_half_encode(HalfFormat format, const float* g, float* e, uint16_t* out, uint64_t n,
                          const CrcSink& sink, Tally* tally, cudaStream_t stream);
/// Undoes a failed encode's error feedback from the partial payload `sent`.
Status launch_half_restore(HalfFormat format, const float* g, const uint16_t* sent, float* e,
                           uint64_t n, cudaStream_t stream);
/// out = a + b, counting bad values of a, b and out in count[0..2].
Status launch_half_sum(HalfFormat format, const uint16_t* a, const uint16_t* b, uint16_t* out,
                       uint64_t n, const CrcSink& sink, Tally* tally, cudaStream_t stream);
/// overwrite: out = 0 + decoded, counting bad values in count[0]; else out += decoded.
Status launch_half_decode(HalfFormat format, const uint16_t* in, float* out, uint64_t n,
                          bool overwrite, Tally* tally, cudaStream_t stream);
Status launch_half_count_nonfinite(HalfFormat format, const uint16_t* in, uint64_t n, Tally* tally,
                                   cudaStream_t stream);

// ---- qsgd: levels of `width` bytes (1, 2 or 4)
// ----------------------------------------------------
/// Quantises g (+ e) on `grid` with the Philox bits of `key`, counting bad v in count[0].
Status launch_qsgd_encode(size_t width, const float* g, float* e, void* out, uint64_t n,
                          const rules::QsgdGrid& grid, const rules::QsgdKey& key,
                          const CrcSink& sink, Tally* tally, cudaStream_t stream);
/// Undoes a failed encode's error feedback from the partial levels `sent`.
Status launch_qsgd_restore(size_t width, const float* g, const void* sent, float* e, uint64_t n,
                           float to_value, cudaStream_t stream);
/// out = a + b, tallying max |a| and max |b| in max[0], max[1].
Status launch_qsgd_sum(size_t width, const void* a, const void* b, void* out, uint64_t n,
                       const CrcSink& sink, Tally* tally, cudaStream_t stream);
/// out (= 0 if overwrite) += level * (*scale / levels), tallying max |level| in max[0].
Status launch_qsgd_decode(size_t width, const void* in, const float* scale, int levels, float* out,
                          uint64_t n, bool overwrite, Tally* tally, cudaStream_t stream);
/// Tallies max |level| in max[slot].
Status launch_qsgd_max_level(size_t width, const void* in, uint64_t n, int slot, Tally* tally,
                             cudaStream_t stream);

// ---- |v| statistics and sign
// -----------------------------------------------------------------------
/// Tallies, over v = g (+ e): the count of bad v in count[0] and the float bits of the largest
/// kept |v| in max[0]; with `block_sums` (room for ceil(n / rules::kSumBlock) doubles), also the
/// ordered |v| sum in sum.
Status launch_abs_stats(const float* g, const float* e, uint64_t n, double* block_sums,
                        Tally* tally, cudaStream_t stream);
/// Encodes the signs of g (+ e) against `scale` (e keeps the difference).
Status launch_sign_encode(const float* g, float* e, uint8_t* bits, uint64_t n, float scale,
                          const CrcSink& sink, cudaStream_t stream);
/// out (= 0 if overwrite) += (bit ? *scale : -*scale).
Status launch_sign_decode(const uint8_t* bits, const float* scale, float* out, uint64_t n,
                          bool overwrite, cudaStream_t stream);

}  // namespace gradgate::kernels::cuda
