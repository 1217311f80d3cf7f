// Top-k selection with error feedback on the GPU, the device counterpart of
// kernels/cpu/topk_select.h. One fused pass adds the gradient into the residual and collects the
// candidates above a warm-started threshold, each tile's in index order (tile_order.h);
// read-only rescans correct that threshold until the candidates number between k and 8k + 1024; a
// radix select among the candidates (topk_plan.h) cuts them to [k, 1.1 k] (threshold mode) or to
// exactly the k largest |v|, ties by lower index (exact mode: the CPU codec's selection, bit for
// bit), and keep compacts those in index order, tile by tile: no sort. When ties defeat every
// candidate threshold the radix select runs over the whole array instead. In steady state only the
// first pass reads the n-element arrays.
//
// The residual: with `clear_in_pass`, the first pass leaves 0 at the candidates it lists (up to
// the list's capacity; their values are in the list) and keep writes back those it drops, so the
// selected are already 0 when the frame is written (DeviceSelection::residual_cleared) and the
// residual's scattered writes are the dropped candidates' only. A rescan, a non-finite gradient,
// the whole-array selection or an error first writes the listed values back. Otherwise the
// residual keeps the selected values until the frame is written (the writer clears them).
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "device_memory.h"
#include "gradgate/kernels/codec_spec.h"
#include "gradgate/kernels/cuda/device_stream.h"
#include "scratch.h"
#include "topk_launch.h"
#include "topk_plan.h"

namespace gradgate::kernels::cuda {

/// What a topk stream keeps on the device: the warm start, the candidate and selection buffers,
/// the compactions' tile state, the histogram and the varint scan's scratch, sized once for the
/// stream's n and k.
class TopkDeviceState final : public DeviceCodecState {
 public:
  /// Buffers for selections from `elements` elements: `candidates` candidates, up to `selected`
  /// selected.
  static Result<std::unique_ptr<TopkDeviceState>> make(size_t elements, size_t candidates,
                                                       size_t selected);
  size_t memory_bytes() const override { return bytes_; }

  topk::WarmStart warm;
  PairList candidates{};
  PairList selected{};
  OrderedTiles tiles{};  // the whole-array keep's
  ListedTiles listed{};  // the first pass's
  uint32_t* bins = nullptr;
  uint64_t* varint_offsets = nullptr;  // selected.capacity + 1
  void* temp = nullptr;
  size_t temp_bytes = 0;
  PinnedPtr<std::array<uint32_t, topk::kSelectBins>> host_bins;  // pinned: a direct copy

 private:
  DevicePtr<std::byte> memory_;
  size_t bytes_ = 0;
};

/// A selection in the state's buffers, ascending by index; or the count of NaN and infinite
/// values of g + e that made it fail (the residual then as it was, to float rounding).
struct DeviceSelection {
  const uint32_t* index = nullptr;
  const float* value = nullptr;
  uint64_t count = 0;
  int passes = 0;  // passes over the n-element arrays
  uint64_t nonfinite = 0;
  bool residual_cleared = false;  // e is already 0 at the selected indices
};

/// What one selection works on.
struct SelectionInput {
  const float* g;
  float* e;  // nullptr without error feedback
  uint64_t n;
  size_t k;
  size_t k_max;        // k for exact selection
  bool clear_in_pass;  // the frame carries the values exactly: e may be cleared as it is read
  TopkFirstPass first_pass;
};

/// What a topk spec asks of the n elements at g (e: the residual, or nullptr): k and k_max as
/// the CPU codec counts them, clearing in the pass where the frame carries fp32 values, and the
/// spec's first pass.
SelectionInput selection_input(const CodecParams& params, const float* g, float* e, uint64_t n);

/// e += g, then selects; when the selection says residual_cleared, e is already 0 at the selected
/// indices (a caller that sends nothing must put their values back). The tally of `scratch` is
/// used; `stream` is synchronised on return.
Result<DeviceSelection> select_topk_on_device(const SelectionInput& in, TopkDeviceState& state,
                                              Scratch& scratch, cudaStream_t stream);

}  // namespace gradgate::kernels::cuda
