// How an all-reduce in GPU memory moves its frames: the CUDA codec encodes and decodes them in GPU
// memory, the transport and the host codec's sums take them in host memory. The collective asks
// for both crossings through this interface; gateway/gpu/device_frame_staging.h implements it
// (through page-locked memory, kept by the tensor from step to step).
#pragma once

#include <cstddef>
#include <functional>
#include <span>

#include "gradgate/base/status.h"

namespace gradgate::gateway {

class FrameStaging {
 public:
  using Write = std::function<Result<size_t>(std::span<std::byte>)>;
  virtual ~FrameStaging() = default;
  /// Runs `write` on GPU memory of `max_bytes`, then copies the bytes it says it wrote into
  /// `out` (at least that long); their count.
  virtual Result<size_t> encode_to_host(size_t max_bytes, const Write& write,
                                        std::span<std::byte> out) = 0;
  /// A copy of `frame` in GPU memory, valid until the next call.
  virtual Result<std::span<const std::byte>> to_device(std::span<const std::byte> frame) = 0;
};

}  // namespace gradgate::gateway
