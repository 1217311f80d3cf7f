#include "topk_selection.h"

#include <algorithm>
#include <cstddef>
#include <string>

#include "../cpu/topk_select.h"  // topk_count, topk_max_count: the CPU codec's k
#include "sparse_launch.h"
#include "tile_order.h"

namespace gradgate::kernels::cuda {
namespace {

constexpr size_t kAlign = 256;
size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// The cut of a radix select over `source`, whose keys all lie in [lo, hi]: `levels` histograms.
struct RadixCut {
  uint64_t key = 0;
  size_t selected = 0;
  int levels = 0;
};

Result<RadixCut> radix_select(const PairSource& source, uint64_t lo, uint64_t hi, size_t k,
                              size_t k_max, TopkDeviceState& state, cudaStream_t stream) {
  RadixCut cut;
  topk::KeyRange range = topk::key_range(lo, hi);
  size_t above = 0;
  for (;;) {
    GRADGATE_RETURN_IF_ERROR(launch_topk_histogram(source, range, state.bins, stream));
    GRADGATE_RETURN_IF_ERROR(read_device(state.host_bins->data(), state.bins,
                                         topk::kSelectBins * sizeof(uint32_t), stream));
    ++cut.levels;
    const topk::CutStep step = topk::cut_step(state.host_bins->data(), range, above, k, k_max);
    if (step.done) {
      cut.key = step.key;
      cut.selected = step.selected;
      return cut;
    }
    range = step.next;
    above = step.above;
  }
}

// Keeps the pairs of `source` at or above `cut` in the state's selection, in index order: of the
// whole array (source.index == nullptr) or of the candidates that the last first pass over n
// elements listed; with `restore`, writes the others' values there.
Status keep(const PairSource& source, uint64_t n, uint64_t cut, size_t expected, float* restore,
            TopkDeviceState& state, Scratch& scratch, cudaStream_t stream) {
  GRADGATE_RETURN_IF_ERROR(scratch.begin(stream));
  GRADGATE_RETURN_IF_ERROR(source.index == nullptr
                               ? launch_topk_keep(source, cut, state.selected, state.tiles, restore,
                                                  scratch.device_tally(), stream)
                               : launch_topk_keep_listed(source, state.listed, n, cut,
                                                         state.selected, restore,
                                                         scratch.device_tally(), stream));
  auto tally = scratch.finish(stream);
  if (!tally.ok()) return tally.status();
  if (tally->count[2] != expected) {
    return Status(ErrorCode::kInternal, "topk selection kept " + std::to_string(tally->count[2]) +
                                            " elements where the histograms counted " +
                                            std::to_string(expected));
  }
  return {};
}

// The candidates whose values the first pass cleared from e: they live in the list only, until
// restore() puts them back (by assignment: safe after keep has put back some of them).
struct ClearedCandidates {
  Status restore(cudaStream_t stream) {
    if (count == 0) return {};
    GRADGATE_RETURN_IF_ERROR(launch_topk_put(PairSource{list.index, list.value, count}, e, stream));
    count = 0;
    return {};
  }

  const PairList& list;
  float* e;
  uint64_t count;
};

// Read-only rescans until `count` (which scan(t) updates) fits the steering's window, or the
// steering gives up; t_scan follows the last scan.
template <typename Scan>
Status steer(topk::ScanSteering& steering, float& t_scan, const size_t& count, Scan&& scan) {
  while (!steering.in_window(count)) {
    const auto next = steering.next(t_scan, count);
    if (!next) break;
    t_scan = *next;
    GRADGATE_RETURN_IF_ERROR(scan(t_scan));
  }
  return {};
}

// One collect pass over the n values at g (with e: e += g first, and with `clear` the listed
// candidates set to 0 in e): the candidates above t into the state's list, and the pass's tally.
Result<Tally> collect(const float* g, float* e, uint64_t n, float t, bool clear,
                      TopkFirstPass first_pass, TopkDeviceState& state, Scratch& scratch,
                      cudaStream_t stream) {
  GRADGATE_RETURN_IF_ERROR(scratch.begin(stream));
  GRADGATE_RETURN_IF_ERROR(launch_topk_collect(g, e, n, t, clear, state.candidates, state.listed,
                                               first_pass, scratch.device_tally(), stream));
  return scratch.finish(stream);
}

// The k largest non-zero |v| of the whole array, kept in the state's selection; returns the cut.
Result<RadixCut> select_whole_array(const float* v, uint64_t n, size_t k, uint64_t top_key,
                                    TopkDeviceState& state, Scratch& scratch, cudaStream_t stream) {
  const PairSource dense{nullptr, v, n};
  const uint64_t nonzero = topk::first_key_above(0.0f);
  RadixCut cut{nonzero, 0, 0};
  if (top_key >= nonzero) {
    auto found = radix_select(dense, nonzero, top_key, k, k, state, stream);
    if (!found.ok()) return found.status();
    cut = *found;
  }
  GRADGATE_RETURN_IF_ERROR(keep(dense, n, cut.key, cut.selected, nullptr, state, scratch, stream));
  return cut;
}

// Cuts the `count` listed candidates above t_scan to [k, k_max] and keeps them in the state's
// selection; returns the cut. The candidates are all listed here (count <= cap): with `restore`,
// those the cut drops go back there.
Result<RadixCut> select_among_candidates(size_t count, uint64_t n, size_t k, size_t k_max,
                                         float t_scan, uint64_t top_key, float* restore,
                                         TopkDeviceState& state, Scratch& scratch,
                                         cudaStream_t stream) {
  const PairSource candidates{state.candidates.index, state.candidates.value, count};
  RadixCut cut{topk::first_key_above(t_scan), count, 0};
  if (count > k_max) {
    auto found = radix_select(candidates, cut.key, top_key, k, k_max, state, stream);
    if (!found.ok()) return found.status();
    cut = *found;
  }
  GRADGATE_RETURN_IF_ERROR(
      keep(candidates, n, cut.key, cut.selected, restore, state, scratch, stream));
  return cut;
}

}  // namespace

Result<std::unique_ptr<TopkDeviceState>> TopkDeviceState::make(size_t elements, size_t candidates,
                                                               size_t selected) {
  auto temp_bytes = topk_varint_temp_bytes(selected);
  if (!temp_bytes.ok()) return temp_bytes.status();
  const uint64_t max_tiles = tile_order::tile_count(elements);
  auto tiles_bytes = ordered_tiles_bytes(max_tiles);
  if (!tiles_bytes.ok()) return tiles_bytes.status();
  auto listed_temp_bytes = listed_tiles_temp_bytes(max_tiles);
  if (!listed_temp_bytes.ok()) return listed_temp_bytes.status();
  const size_t candidate_index = 0;
  const size_t candidate_value = candidate_index + aligned(candidates * sizeof(uint32_t));
  const size_t selected_index = candidate_value + aligned(candidates * sizeof(float));
  const size_t selected_value = selected_index + aligned(selected * sizeof(uint32_t));
  const size_t tiles = selected_value + aligned(selected * sizeof(float));
  const size_t bins = tiles + aligned(*tiles_bytes);
  const size_t offsets = bins + aligned(topk::kSelectBins * sizeof(uint32_t));
  const size_t temp = offsets + aligned((selected + 1) * sizeof(uint64_t));
  const size_t listed_first = temp + aligned(*temp_bytes);
  const size_t listed_count = listed_first + aligned(max_tiles * sizeof(uint32_t));
  const size_t listed_kept = listed_count + aligned(max_tiles * sizeof(uint32_t));
  const size_t listed_temp = listed_kept + aligned(max_tiles * sizeof(uint32_t));
  const size_t total = listed_temp + aligned(*listed_temp_bytes);
  auto memory = device_alloc<std::byte>(total);
  if (!memory.ok()) return memory.status();
  auto state = std::unique_ptr<TopkDeviceState>(new TopkDeviceState());
  std::byte* base = memory->get();
  state->candidates = {reinterpret_cast<uint32_t*>(base + candidate_index),
                       reinterpret_cast<float*>(base + candidate_value), candidates};
  state->selected = {reinterpret_cast<uint32_t*>(base + selected_index),
                     reinterpret_cast<float*>(base + selected_value), selected};
  state->tiles = {base + tiles, max_tiles};
  state->bins = reinterpret_cast<uint32_t*>(base + bins);
  state->varint_offsets = reinterpret_cast<uint64_t*>(base + offsets);
  state->temp = base + temp;
  state->temp_bytes = *temp_bytes;
  state->listed = {reinterpret_cast<uint32_t*>(base + listed_first),
                   reinterpret_cast<uint32_t*>(base + listed_count),
                   reinterpret_cast<uint32_t*>(base + listed_kept),
                   base + listed_temp,
                   *listed_temp_bytes,
                   max_tiles};
  auto host_bins = pinned_alloc<std::array<uint32_t, topk::kSelectBins>>();
  if (!host_bins.ok()) return host_bins.status();
  state->host_bins = std::move(host_bins).value();
  state->memory_ = std::move(memory).value();
  state->bytes_ = total;
  return state;
}

SelectionInput selection_input(const CodecParams& params, const float* g, float* e, uint64_t n) {
  const size_t k = cpu::topk_count(params.density, n);
  const size_t k_max = params.select == TopkSelect::kExact ? k : cpu::topk_max_count(k);
  return {g, e, n, k, k_max, params.values != ValueType::kFp16, params.first_pass};
}

Result<DeviceSelection> select_topk_on_device(const SelectionInput& in, TopkDeviceState& state,
                                              Scratch& scratch, cudaStream_t stream) {
  DeviceSelection selection;
  const uint64_t n = in.n;
  const size_t cap = state.candidates.capacity;
  const float* v = in.e ? in.e : in.g;  // the values selected from, after the first pass
  const bool was_warm = state.warm.warm();
  float t_scan = state.warm.candidate_threshold();

  // Pass 1: e += g and the candidates above the warm-start threshold (none when cold).
  const bool clear_in_pass = in.e && in.clear_in_pass;
  auto first = collect(in.g, in.e, n, t_scan, clear_in_pass, in.first_pass, state, scratch, stream);
  if (!first.ok()) return first.status();
  selection.passes = 1;
  ClearedCandidates cleared{state.candidates, in.e,
                            clear_in_pass ? std::min<uint64_t>(first->count[1], cap) : 0};
  // An error after the first pass leaves e accumulated (e + g), as it did before clearing in the
  // pass: the listed values go back.
  const auto fail = [&](const Status& error) -> Status {
    if (cleared.restore(stream).ok()) (void)scratch.finish(stream);
    return error;
  };
  if (first->count[0] != 0) {
    if (in.e) {
      GRADGATE_RETURN_IF_ERROR(cleared.restore(stream));
      GRADGATE_RETURN_IF_ERROR(launch_unaccumulate(in.g, in.e, n, stream));
      GRADGATE_RETURN_IF_ERROR(scratch.finish(stream).status());
    }
    selection.nonfinite = first->count[0];
    return selection;
  }
  const double b = first->sum / static_cast<double>(n);
  const float largest = bits_float(first->max[0]);
  size_t count = first->count[1];

  // Read-only rescans until the candidates fit [k, cap].
  const auto scan = [&](float t) -> Status {
    auto tally = collect(v, nullptr, n, t, false, in.first_pass, state, scratch, stream);
    if (!tally.ok()) return tally.status();
    count = tally->count[1];
    ++selection.passes;
    return {};
  };
  topk::ScanSteering steering(n, in.k, cap, b);
  if (!steering.in_window(count)) {
    GRADGATE_RETURN_IF_ERROR(cleared.restore(stream));  // rescans read e
  }
  if (!was_warm) {
    t_scan = topk::laplace_threshold(b, n, topk::kCandidateFactor * static_cast<double>(in.k));
    GRADGATE_RETURN_IF_ERROR(scan(t_scan));
  }
  GRADGATE_RETURN_IF_ERROR(steer(steering, t_scan, count, scan));

  const uint64_t top_key = topk::order_key(largest, 0);
  if (steering.needs_whole_array(t_scan, count)) {
    // Ties: no candidate threshold separates k.
    auto cut = select_whole_array(v, n, in.k, top_key, state, scratch, stream);
    if (!cut.ok()) return cut.status();
    selection.passes += cut->levels + 1;
    selection.count = cut->selected;
    state.warm.threshold = 0.0f;  // cold again next step
  } else {
    auto cut = select_among_candidates(count, n, in.k, in.k_max, t_scan, top_key,
                                       cleared.count ? in.e : nullptr, state, scratch, stream);
    if (!cut.ok()) return fail(cut.status());
    selection.residual_cleared = cleared.count != 0;
    selection.count = cut->selected;
    const auto cut_bits = static_cast<uint32_t>(cut->key >> 32);
    state.warm.update(cut_bits > 0 ? bits_float(cut_bits - 1) : 0.0f, t_scan, count, cut->selected,
                      b, was_warm);
  }

  selection.index = state.selected.index;
  selection.value = state.selected.value;
  return selection;
}

}  // namespace gradgate::kernels::cuda
