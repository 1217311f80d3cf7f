// The hot loops of the CPU codecs, compiled twice from loops_impl.h: once for baseline x86-64 (or
// any other CPU) and once for AVX2+FMA+F16C. loops() picks the best table the CPU supports; tests
// force either with force_isa() to check that both give the same answers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "gradgate/kernels/element_rules.h"

namespace gradgate::kernels::cpu {

/// Statistics of |v| over a pass, where v = g + e.
struct AbsStats {
  double abs_sum = 0.0;
  float abs_max = 0.0f;
  size_t nonfinite = 0;  // elements where v is NaN or infinite (excluded from sum and max)
};

/// Result of a pass that collects the elements with |v| > t: their count (even beyond the
/// capacity of the output arrays, which then hold the first `cap` of them) and |v| statistics.
struct SelectResult {
  size_t count = 0;
  /// accumulate_select: the first `cleared` collected elements were also set to zero in e
  /// (their values are in val[0, cleared)); the others are still in e.
  size_t cleared = 0;
  AbsStats stats;
};

/// Additions to e that a pass still has to make, in ascending index order.
struct PendingFixes {
  const uint32_t* indices = nullptr;
  const float* values = nullptr;
  size_t count = 0;
};

struct LoopTable {
  const char* isa;

  /// out = in; returns the number of non-finite values.
  size_t (*copy_checked)(const float* in, float* out, size_t n);
  size_t (*count_nonfinite)(const float* in, size_t n);
  /// acc += in.
  void (*add)(const float* in, float* acc, size_t n);
  /// out = a + b; returns the number of non-finite sums (from a non-finite a or b, or an overflow).
  size_t (*sum_checked)(const float* a, const float* b, float* out, size_t n);

  /// v = g + e (e may be null: v = g); out = half(v) with round-to-nearest-even, saturating at
  /// the format's largest finite value; e = v - out.
  /// Where v is non-finite e keeps its value. Returns the number of v that cannot be sent:
  /// non-finite, or without e beyond the format's range (rules::half_sendable).
  size_t (*encode_fp16)(const float* g, float* e, uint16_t* out, size_t n);
  size_t (*encode_bf16)(const float* g, float* e, uint16_t* out, size_t n);
  size_t (*count_nonfinite_fp16)(const uint16_t* in, size_t n);
  size_t (*count_nonfinite_bf16)(const uint16_t* in, size_t n);
  void (*add_fp16)(const uint16_t* in, float* acc, size_t n);
  void (*add_bf16)(const uint16_t* in, float* acc, size_t n);
  /// out = half(float(a) + float(b)); returns the number of non-finite results.
  size_t (*sum_fp16)(const uint16_t* a, const uint16_t* b, uint16_t* out, size_t n);
  size_t (*sum_bf16)(const uint16_t* a, const uint16_t* b, uint16_t* out, size_t n);

  /// Statistics of |g + e| (e may be null). Reads only.
  AbsStats (*abs_stats)(const float* g, const float* e, size_t n);
  /// e += g where the sum is finite; statistics of the new |e|.
  AbsStats (*accumulate)(const float* g, float* e, size_t n);
  /// e += g (as accumulate) fused with collecting (index, e) of every |e| > t into idx/val and
  /// clearing them in e (most will be sent; the caller writes back those that are not), for as
  /// long as a whole group of 8 elements is sure to find room: an element is cleared when at the
  /// start of its aligned group of 8 (the tail is the last group) count + 8 <= cap.
  /// idx and val must have room for cap + 8 entries.
  /// Before g is added, the same pass applies the corrections held aside since the last step:
  /// e[fix.indices[j]] += fix.values[j] (indices ascending and below n).
  SelectResult (*accumulate_select)(const float* g, float* e, size_t n, float t, uint32_t* idx,
                                    float* val, size_t cap, const PendingFixes& fix);
  /// Collects (index, e) of every |e| > t, reading e only. Same capacity rule.
  size_t (*scan_select)(const float* e, size_t n, float t, uint32_t* idx, float* val, size_t cap);

  /// qsgd: v = g + e (e may be null); out = rules::qsgd_level(v, u, grid) with u the
  /// rules::qsgd_uniform of element i; e = v - out * scale / levels. Returns the number of
  /// non-finite v (out is 0 and e keeps its value there).
  size_t (*quantize_i8)(const float* g, float* e, int8_t* out, size_t n, float scale, int levels,
                        const rules::QsgdKey& key);
  size_t (*quantize_i16)(const float* g, float* e, int16_t* out, size_t n, float scale, int levels,
                         const rules::QsgdKey& key);
  size_t (*quantize_i32)(const float* g, float* e, int32_t* out, size_t n, float scale, int levels,
                         const rules::QsgdKey& key);
  /// acc += in * step.
  void (*dequantize_add_i8)(const int8_t* in, float step, float* acc, size_t n);
  void (*dequantize_add_i16)(const int16_t* in, float step, float* acc, size_t n);
  void (*dequantize_add_i32)(const int32_t* in, float step, float* acc, size_t n);
  /// Largest |in| (to check a frame against its level bound).
  uint32_t (*max_abs_i8)(const int8_t* in, size_t n);
  uint32_t (*max_abs_i16)(const int16_t* in, size_t n);
  uint32_t (*max_abs_i32)(const int32_t* in, size_t n);
  /// out = a + b.
  void (*sum_i8)(const int8_t* a, const int8_t* b, int8_t* out, size_t n);
  void (*sum_i16)(const int16_t* a, const int16_t* b, int16_t* out, size_t n);
  void (*sum_i32)(const int32_t* a, const int32_t* b, int32_t* out, size_t n);

  /// sign: v = g + e (e may be null); bit i of out = v_i >= 0; e = v - (bit ? scale : -scale).
  /// out holds ceil(n / 8) bytes, bit i in byte i / 8 at position i % 8. Returns non-finite count.
  size_t (*encode_sign)(const float* g, float* e, uint8_t* out, size_t n, float scale);
  /// acc += bit ? scale : -scale.
  void (*add_sign)(const uint8_t* in, float scale, float* acc, size_t n);
};

/// Undoes a failed encode's error feedback: e = e + decoded - g wherever that is finite (elements
/// whose sum overflowed were never updated). `decoded` is what the partial frame decodes to, empty
/// when the encode only added g. The error path, not a hot loop.
void restore_residual(std::span<const float> g, std::span<const float> decoded, std::span<float> e);

enum class Isa { kBaseline, kAvx2 };

/// The loops for the active instruction set.
const LoopTable& loops();
/// The best instruction set this CPU supports.
Isa best_isa();
/// Forces an instruction set (tests); forcing one the CPU lacks is ignored.
void force_isa(Isa isa);

}  // namespace gradgate::kernels::cpu
