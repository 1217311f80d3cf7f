// Per-thread, per-device working memory of the CUDA codecs: the Tally their kernels count into
// (device memory, mirrored in pinned host memory for the read-back) and a growable device area
// for intermediate results. Each codec call is synchronous (it waits for its stream before it
// returns), so one thread's calls never overlap and can share one Scratch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "device_memory.h"
#include "launch.h"

namespace gradgate::kernels::cuda {

class Scratch {
 public:
  /// The calling thread's Scratch for the current device, made on first use.
  static Result<Scratch*> current();

  Tally* device_tally() const { return tally_.get(); }

  /// Device memory of at least `bytes`, valid until the next call of area() on this thread.
  Result<void*> area(size_t bytes);

  /// Zeroes the device tally on `stream`: the start of an operation.
  Status begin(cudaStream_t stream) const;
  /// Copies `bytes` (at most 4) from device memory at `from` into the tally's word[slot].
  Status copy_word(int slot, const void* from, size_t bytes, cudaStream_t stream) const;
  /// Waits for everything enqueued on `stream` and returns the tally: the end of an operation.
  Result<Tally> finish(cudaStream_t stream) const;

 private:
  Scratch(DevicePtr<Tally> tally, PinnedPtr<Tally> host)
      : tally_(std::move(tally)), host_(std::move(host)) {}

  DevicePtr<Tally> tally_;
  PinnedPtr<Tally> host_;
  DevicePtr<std::byte> area_;
  size_t area_bytes_ = 0;
};

}  // namespace gradgate::kernels::cuda
