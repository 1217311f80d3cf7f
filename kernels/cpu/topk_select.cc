#include "topk_select.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "gradgate/kernels/half.h"  // float_bits, bits_float
#include "loops.h"

namespace gradgate::kernels::cpu {
namespace {

constexpr int kMaxRefinements = 64;  // count-and-correct steps among the candidates

// The k-th largest |val| (1-based).
float kth_largest(std::span<const float> val, size_t k) {
  std::vector<float> magnitudes(val.size());
  std::transform(val.begin(), val.end(), magnitudes.begin(), [](float v) { return std::fabs(v); });
  std::nth_element(magnitudes.begin(), magnitudes.begin() + static_cast<ptrdiff_t>(k - 1),
                   magnitudes.end(), std::greater<>());
  return magnitudes[k - 1];
}

// Stores (or with kAdd, adds) `values` at `indices` of e, prefetching ahead: the lines were
// evicted long ago, and overlapping the misses is what makes a scatter of ~k elements cheap.
template <bool kAdd = false>
void scatter(float* e, const uint32_t* indices, const float* values, size_t count) {
  constexpr size_t kPrefetchDistance = 64;
  for (size_t j = 0; j < count; ++j) {
    if (j + kPrefetchDistance < count) __builtin_prefetch(e + indices[j + kPrefetchDistance], 1);
    e[indices[j]] = kAdd ? e[indices[j]] + values[j] : values[j];
  }
}

// Keeps the candidates that `keep(j, |v|)` accepts (called once per candidate, in order),
// compacted to the front in index order, and (with feedback) leaves the fixes that make e agree
// pending: a cleared candidate left behind gets its value back (0 + v), a kept one that was not
// cleared becomes zero (v + -v). Both sums are exact. Returns how many are kept.
template <typename Keep>
size_t settle(uint32_t* idx, float* val, size_t count, size_t cleared, bool feedback,
              TopkSelectorState& st, Keep&& keep) {
  st.pending_indices.resize(count + 1);
  st.pending_values.resize(count + 1);
  uint32_t* fix_idx = st.pending_indices.data();
  float* fix_val = st.pending_values.data();
  size_t kept = 0, fixes = 0;
  for (size_t j = 0; j < count; ++j) {  // branch-free: about a third of the candidates go back
    const uint32_t i = idx[j];
    const float v = val[j];
    const bool stays = keep(j, std::fabs(v));
    fix_idx[fixes] = i;
    fix_val[fixes] = stays ? -v : v;
    fixes += (j < cleared) != stays;  // cleared and dropped, or kept and not cleared
    idx[kept] = i;
    val[kept] = v;
    kept += stays;
  }
  st.pending_count = feedback ? fixes : 0;
  return kept;
}

size_t count_above(std::span<const float> val, float t) {
  size_t c = 0;
  for (float v : val) c += std::fabs(v) > t;
  return c;
}

// A threshold among the candidates (all above t_scan, at most `top`) from a histogram of |v|.
// Bins are ranges of the float bit pattern, which is monotonic in |v| and close to logarithmic,
// so the bins follow heavy tails and their edges are exact floats: the count above an edge is
// exactly the sum of the bins from there up. Returns the threshold just below the edge where the
// count from the top reaches k, or NaN (with the crowded bin) when that bin alone holds more than
// k_max - k elements.
struct HistogramCut {
  float threshold = std::numeric_limits<float>::quiet_NaN();
  float lo = 0.0f, hi = 0.0f;  // the bin holding the k-th largest, for the fallback
};

HistogramCut histogram_threshold(std::span<const float> val, float t_scan, float top, size_t k,
                                 size_t k_max) {
  constexpr uint32_t kBins = 4096;
  constexpr int kCopies = 4;  // interleaved histograms: fewer stalls on repeated bins
  HistogramCut cut{std::numeric_limits<float>::quiet_NaN(), t_scan, top};
  const uint32_t base = float_bits(t_scan);
  const uint32_t span = float_bits(top) - base;
  int shift = 0;
  while ((span >> shift) >= kBins) ++shift;
  std::vector<uint32_t> bins(kCopies * kBins, 0);
  const size_t count = val.size();
  for (size_t j = 0; j < count; ++j) {
    const uint32_t bin = (float_bits(std::fabs(val[j])) - base) >> shift;
    ++bins[(j % kCopies) * kBins + std::min(bin, kBins - 1)];
  }
  size_t above = 0;
  for (uint32_t b = kBins; b-- > 0;) {
    size_t in_bin = 0;
    for (int c = 0; c < kCopies; ++c) in_bin += bins[c * kBins + b];
    if (above + in_bin >= k) {
      cut.lo = bits_float(base + (b << shift));
      cut.hi = b + 1 < kBins ? bits_float(base + ((b + 1) << shift)) : top;
      if (above + in_bin <= k_max) cut.threshold = std::nextafter(cut.lo, 0.0f);
      return cut;
    }
    above += in_bin;
  }
  return cut;
}

// Among the candidates, finds t with count(|v| > t) in [k, k_max]: a histogram cut, then
// bisection inside the cut's bin. Returns NaN when ties make that impossible.
float refine_threshold(std::span<const float> val, float t_scan, float top, size_t k,
                       size_t k_max) {
  const HistogramCut cut = histogram_threshold(val, t_scan, top, k, k_max);
  if (!std::isnan(cut.threshold)) return cut.threshold;
  double lo = std::nextafter(cut.lo, 0.0f),
         hi = std::nextafter(cut.hi, std::numeric_limits<float>::max());
  for (int step = 0; step < kMaxRefinements; ++step) {
    const auto t = static_cast<float>(0.5 * (lo + hi));
    if (t <= static_cast<float>(lo) || t >= static_cast<float>(hi)) break;  // ties
    const size_t c = count_above(val, t);
    if (c >= k && c <= k_max) return t;
    (c > k_max ? lo : hi) = t;
  }
  return std::numeric_limits<float>::quiet_NaN();
}

// The k largest |v| over the whole array, ties broken by position: the fallback when ties keep
// every candidate threshold outside [k, cap] (e.g. many equal values). Needs O(n) scratch; never
// taken on gradients with distinct values. Zeros are never selected.
size_t select_exact_full(const float* v, size_t n, size_t k, uint32_t* idx, float* val) {
  const float kth = kth_largest({v, n}, k);
  size_t above = 0;
  for (size_t i = 0; i < n; ++i) above += std::fabs(v[i]) > kth;
  size_t ties_left = kth > 0.0f ? k - above : 0;
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    const float a = std::fabs(v[i]);
    if (a > kth || (a == kth && ties_left > 0)) {
      if (a == kth) --ties_left;
      idx[count] = static_cast<uint32_t>(i);
      val[count] = v[i];
      ++count;
    }
  }
  return count;
}

// Pass 1 of select_topk: accumulates (with error feedback) and, when warm, collects the candidates
// above t_scan in the same pass. Counts its passes in sel.
SelectResult first_pass(const LoopTable& loops, std::span<const float> g, std::span<float> e,
                        float t_scan, bool warm, uint32_t* idx, float* val, size_t cap,
                        TopkSelectorState& st, Selection& sel) {
  const size_t n = g.size();
  SelectResult r;
  if (!e.empty()) {
    const PendingFixes fix{st.pending_indices.data(), st.pending_values.data(), st.pending_count};
    r = loops.accumulate_select(g.data(), e.data(), n, t_scan, idx, val, cap, fix);
    st.pending_count = 0;
  } else {
    r.stats = loops.abs_stats(g.data(), nullptr, n);
    if (warm) {
      r.count = loops.scan_select(g.data(), n, t_scan, idx, val, cap);
      ++sel.passes;
    }
  }
  sel.passes += 1;
  return r;
}

// The selection when ties keep every candidate threshold outside [k, cap]: the k largest of the
// whole array (select_exact_full), all kept; the next step starts cold.
Selection select_whole_array(const float* v, size_t n, size_t k, uint32_t* idx, float* val,
                             bool feedback, TopkSelectorState& st, Selection sel) {
  const size_t count = select_exact_full(v, n, k, idx, val);
  ++sel.passes;
  settle(idx, val, count, 0, feedback, st, [](size_t, float) { return true; });
  sel.indices = {idx, count};
  sel.values = {val, count};
  sel.threshold = std::numeric_limits<float>::max();
  for (size_t j = 0; j < count; ++j) sel.threshold = std::min(sel.threshold, std::fabs(val[j]));
  st.threshold = 0.0f;  // cold again next step
  return sel;
}

// The final selection among the `count` candidates above `threshold` (the scan's): all of them
// when they are at most k_max, else those above a refined threshold, else the k largest, ties by
// position. Settles them and returns how many are kept; `threshold` becomes the selection's.
size_t select_among_candidates(uint32_t* idx, float* val, size_t count, size_t cleared, size_t k,
                               TopkSelect mode, float abs_max, bool feedback, TopkSelectorState& st,
                               float& threshold) {
  const size_t k_max = mode == TopkSelect::kExact ? k : topk_max_count(k);
  const float t = count <= k_max || mode == TopkSelect::kExact
                      ? std::numeric_limits<float>::quiet_NaN()
                      : refine_threshold({val, count}, threshold, abs_max, k, k_max);
  if (count <= k_max) {
    return settle(idx, val, count, cleared, feedback, st, [](size_t, float) { return true; });
  }
  if (!std::isnan(t)) {
    threshold = t;
    return settle(idx, val, count, cleared, feedback, st, [t](size_t, float a) { return a > t; });
  }
  // Exact mode, or ties inside one histogram bin: the k largest, ties by position.
  threshold = kth_largest({val, count}, k);
  size_t ties = k - count_above({val, count}, threshold);
  return settle(idx, val, count, cleared, feedback, st, [&](size_t, float a) {
    const bool tie = a == threshold && ties > 0;
    ties -= tie;
    return a > threshold || tie;
  });
}

}  // namespace

size_t topk_count(double density, size_t n) {
  const auto k = static_cast<size_t>(std::llround(density * static_cast<double>(n)));
  return std::clamp<size_t>(k, 1, n);
}

size_t topk_max_count(size_t k) { return k + k / 10; }

void apply_pending(TopkSelectorState& st, std::span<float> e) {
  scatter<true>(e.data(), st.pending_indices.data(), st.pending_values.data(), st.pending_count);
  st.pending_count = 0;
}

Result<Selection> select_topk(std::span<const float> g, std::span<float> e, size_t k,
                              TopkSelect mode, TopkSelectorState& st) {
  const LoopTable& loops = cpu::loops();
  const size_t n = g.size();
  const bool feedback = !e.empty();
  const float* v = feedback ? e.data() : g.data();  // the values selected from, after the pass
  const size_t cap = topk::candidate_capacity(n, k);
  st.indices.resize(cap + 8);
  st.values.resize(cap + 8);
  uint32_t* idx = st.indices.data();
  float* val = st.values.data();

  Selection sel;
  const bool warm = st.warm();
  float t_scan = st.candidate_threshold();
  const SelectResult first = first_pass(loops, g, e, t_scan, warm, idx, val, cap, st, sel);
  size_t count = first.count;
  size_t cleared = first.cleared;  // candidates [0, cleared) are zero in e until settled
  const AbsStats& stats = first.stats;
  // Puts the cleared candidates back into e: before any rescan reads e, or on error.
  const auto write_back = [&] {
    scatter(e.data(), idx, val, cleared);
    cleared = 0;
  };
  if (stats.nonfinite != 0) {
    if (feedback) {
      write_back();
      restore_residual(g, {}, e);
    }
    return Status(ErrorCode::kNonFiniteGradient,
                  "gradient has " + std::to_string(stats.nonfinite) +
                      " NaN or infinite values; nothing was encoded");
  }
  const double b = stats.abs_sum / static_cast<double>(n);

  // Bring the candidate count into [k, cap] with read-only rescans.
  topk::ScanSteering steering(n, k, cap, b);
  if (!steering.in_window(count)) write_back();
  if (!warm) {
    t_scan = topk::laplace_threshold(b, n, topk::kCandidateFactor * static_cast<double>(k));
    count = loops.scan_select(v, n, t_scan, idx, val, cap);
    ++sel.passes;
  }
  while (!steering.in_window(count)) {
    const std::optional<float> next = steering.next(t_scan, count);
    if (!next) break;  // fewer than k non-zero elements (send them all), ties, or scans used up
    t_scan = *next;
    count = loops.scan_select(v, n, t_scan, idx, val, cap);
    ++sel.passes;
  }
  if (steering.needs_whole_array(t_scan, count)) {  // ties: no threshold separates k
    return select_whole_array(v, n, k, idx, val, feedback, st, sel);
  }

  const size_t candidates = count;
  float threshold = t_scan;
  count = select_among_candidates(idx, val, count, cleared, k, mode, stats.abs_max, feedback, st,
                                  threshold);
  st.update(threshold, t_scan, candidates, count, b, warm);  // the next step's warm start
  sel.indices = {idx, count};
  sel.values = {val, count};
  sel.threshold = threshold;
  return sel;
}

}  // namespace gradgate::kernels::cpu
