// The codecs gradgate knows, in one table: each one's wire id, name and traits. Every other list
// of codecs derives from it: CodecId and the names here, the factories of the CPU and the CUDA
// codec libraries (codec_factories.h), the C API's gg_codec (checked at compile time against
// GRADGATE_CODEC_TABLE) and the Python package's names (read from the library, gg_codec_name).
// Adding a codec is one row here plus the codec's own files.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gradgate/base/check.h"
#include "gradgate/base/status.h"

// X(enumerator, wire id, name, C enumerator suffix, factory stem, traits...). The factory stem
// names the codec's make_<stem>_codec in each codec library; the traits are those of CodecTraits,
// in its order.
//
//  enumerator  id  name        C suffix  factory   lossy  summable  alike  scale_pass
#define GRADGATE_CODEC_TABLE(X)                                        \
  X(kNone, 0, "none", NONE, none, false, true, true, false)            \
  X(kFp16, 1, "fp16", FP16, half, true, true, true, false)             \
  X(kBf16, 2, "bf16", BF16, half, true, true, true, false)             \
  X(kQsgd, 3, "qsgd", QSGD, qsgd, true, true, true, true)              \
  X(kSign, 4, "sign", SIGN, sign, true, false, true, true)             \
  X(kTopk, 5, "topk", TOPK, topk, true, false, true, false)            \
  X(kRandomk, 6, "randomk", RANDOMK, randomk, true, true, true, false) \
  X(kPowersgd, 7, "powersgd", POWERSGD, powersgd, true, true, false, true)

namespace gradgate {

/// The codec id of the wire frame (one byte of its header).
enum class CodecId : uint8_t {
#define GRADGATE_CODEC_ENUMERATOR(e, id, ...) e = id,
  GRADGATE_CODEC_TABLE(GRADGATE_CODEC_ENUMERATOR)
#undef GRADGATE_CODEC_ENUMERATOR
};

struct CodecTraits {
  CodecId id;
  std::string_view name;
  /// Encoding loses information, so the codec keeps a residual when error feedback is on.
  bool lossy;
  /// Frames of several gateways add up into one frame of the sum (the ring can carry them).
  bool summable;
  /// Decoding a frame gives the same bits on the GPU and the CPU, so gateways that place the
  /// codec on different sides still agree.
  bool decodes_alike_on_gpu_and_cpu;
  /// Encoding first reads the whole gradient (and residual) once for a global scale or norm.
  bool scale_pass;
};

inline constexpr std::array kCodecs = {
#define GRADGATE_CODEC_TRAITS(e, id, name, c_suffix, factory, ...) \
  CodecTraits{CodecId::e, name, __VA_ARGS__},
    GRADGATE_CODEC_TABLE(GRADGATE_CODEC_TRAITS)
#undef GRADGATE_CODEC_TRAITS
};
inline constexpr int kCodecCount = static_cast<int>(kCodecs.size());

namespace codec_table_checks {
constexpr bool ids_are_indices() {
  for (size_t i = 0; i < kCodecs.size(); ++i) {
    if (static_cast<size_t>(kCodecs[i].id) != i) return false;
  }
  return true;
}
static_assert(ids_are_indices(), "codec ids must be 0, 1, 2, ... in table order");
static_assert(kCodecCount < 255, "255 is gg_codec's GG_CODEC_UNKNOWN");
}  // namespace codec_table_checks

/// Whether a wire byte names a codec of the table.
constexpr bool is_codec_id(unsigned value) { return value < kCodecs.size(); }

/// The row of a codec of the table (`id` must be one: is_codec_id).
constexpr const CodecTraits& codec_traits(CodecId id) {
  GRADGATE_DCHECK(is_codec_id(static_cast<unsigned>(id)), "a codec id outside the table");
  return kCodecs[static_cast<size_t>(id)];
}

/// Lower-case codec name ("none", "fp16", ..., "powersgd"); "unknown" for ids out of range.
constexpr std::string_view codec_name(CodecId id) {
  return is_codec_id(static_cast<unsigned>(id)) ? codec_traits(id).name : "unknown";
}

/// The id for a codec name, or kInvalidArgument naming the known ones.
Result<CodecId> codec_from_name(std::string_view name);

/// "none, fp16, ..., powersgd": the names of the table, for messages.
std::string codec_names_list();

}  // namespace gradgate
