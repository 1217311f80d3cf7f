#include "gradgate/kernels/codec_spec.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <utility>
#include <sstream>
#include <string>
#include <vector>

namespace gradgate::kernels {
namespace {

Status bad(std::string_view spec, const std::string& what) {
  return Status(ErrorCode::kInvalidArgument, "codec spec '" + std::string(spec) + "': " + what);
}

template <typename T>
bool parse_number(std::string_view text, T& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

// One of a key's named values.
template <typename T>
bool parse_choice(std::string_view value,
                  std::initializer_list<std::pair<std::string_view, T>> choices, T& out) {
  for (const auto& [name, choice] : choices) {
    if (name == value) {
      out = choice;
      return true;
    }
  }
  return false;
}

// The shortest text that parses back to exactly `value`.
std::string shortest(double value) {
  char buffer[32];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, ec == std::errc() ? end : buffer);
}

Status apply_key(CodecParams& p, std::string_view spec, std::string_view key,
                 std::string_view value) {
  const auto invalid = [&] {
    return bad(spec,
               "invalid value '" + std::string(value) + "' for key '" + std::string(key) + "'");
  };
  if (key == "ef" && codec_traits(p.id).lossy) {
    if (value != "0" && value != "1") return invalid();
    p.error_feedback = value == "1";
  } else if (key == "bits" && p.id == CodecId::kQsgd) {
    if (!parse_number(value, p.bits)) return invalid();
  } else if (key == "workers" && p.id == CodecId::kQsgd) {
    if (!parse_number(value, p.max_workers)) return invalid();
  } else if (key == "density" && (p.id == CodecId::kTopk || p.id == CodecId::kRandomk)) {
    if (!parse_number(value, p.density)) return invalid();
  } else if (key == "overlap" && p.id == CodecId::kTopk) {
    if (!parse_number(value, p.overlap)) return invalid();
  } else if (key == "select" && p.id == CodecId::kTopk) {
    if (!parse_choice(value, {{"exact", TopkSelect::kExact}, {"threshold", TopkSelect::kThreshold}},
                      p.select)) {
      return invalid();
    }
  } else if (key == "values" && p.id == CodecId::kTopk) {
    if (!parse_choice(value, {{"fp32", ValueType::kFp32}, {"fp16", ValueType::kFp16}}, p.values)) {
      return invalid();
    }
  } else if (key == "first_pass" && p.id == CodecId::kTopk) {
    if (!parse_choice(
            value, {{"registers", TopkFirstPass::kRegisters}, {"staged", TopkFirstPass::kStaged}},
            p.first_pass)) {
      return invalid();
    }
  } else if (key == "rank" && p.id == CodecId::kPowersgd) {
    if (!parse_number(value, p.rank)) return invalid();
  } else {
    return bad(spec, "key '" + std::string(key) + "' does not apply to codec " +
                         std::string(codec_name(p.id)));
  }
  return {};
}

}  // namespace

int qsgd_headroom_bits(int max_workers) {
  return static_cast<int>(std::bit_width(static_cast<unsigned>(std::max(max_workers, 1) - 1)));
}

size_t qsgd_level_bytes(int bits, int headroom_bits) {
  const int needed = bits + 1 + headroom_bits;
  return needed <= 8 ? 1 : needed <= 16 ? 2 : 4;
}

Status validate_codec_params(const CodecParams& p) {
  const auto out_of_range = [&](const std::string& what) {
    return Status(ErrorCode::kInvalidArgument, std::string(codec_name(p.id)) + ": " + what);
  };
  switch (p.id) {
    case CodecId::kQsgd:
      if (p.bits < 1 || p.bits > 15) return out_of_range("bits must be in [1, 15]");
      if (p.max_workers < 1 || p.max_workers > 65535) {
        return out_of_range("workers must be in [1, 65535]");
      }
      if (p.bits + 1 + qsgd_headroom_bits(p.max_workers) > 32) {
        return out_of_range("bits + 1 + ceil(log2(workers)) must fit in 32 bits");
      }
      break;
    case CodecId::kTopk:
    case CodecId::kRandomk:
      if (!(p.density > 0.0 && p.density <= 1.0)) return out_of_range("density must be in (0, 1]");
      if (!(p.overlap >= 0.0 && p.overlap < 1.0)) return out_of_range("overlap must be in [0, 1)");
      break;
    case CodecId::kPowersgd:
      if (p.rank < 1 || p.rank > 64) return out_of_range("rank must be in [1, 64]");
      break;
    default:
      break;
  }
  return {};
}

Result<CodecParams> parse_codec_spec(std::string_view spec) {
  const auto colon = spec.find(':');
  auto id = codec_from_name(spec.substr(0, colon));
  if (!id.ok()) return bad(spec, id.status().message());
  CodecParams params;
  params.id = *id;
  if (colon != std::string_view::npos) {
    std::string_view rest = spec.substr(colon + 1);
    std::vector<std::string_view> seen;
    for (;;) {
      const auto comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      const auto eq = item.find('=');
      if (eq == std::string_view::npos || eq == 0) {
        return bad(spec, "expected KEY=VALUE, got '" + std::string(item) + "'");
      }
      const std::string_view key = item.substr(0, eq);
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
        return bad(spec, "key '" + std::string(key) + "' given twice");
      }
      seen.push_back(key);
      GRADGATE_RETURN_IF_ERROR(apply_key(params, spec, key, item.substr(eq + 1)));
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
  }
  GRADGATE_RETURN_IF_ERROR(validate_codec_params(params));
  return params;
}

CodecParams sent_in_precision(const CodecParams& codec, CodecId precision) {
  if (codec.id != CodecId::kNone || precision == CodecId::kNone) return codec;
  return CodecParams{.id = precision, .error_feedback = false};
}

std::string format_codec_spec(const CodecParams& p) {
  std::ostringstream out;
  out << codec_name(p.id);
  char sep = ':';
  const auto key = [&](std::string_view k, const auto& v) {
    out << sep << k << '=' << v;
    sep = ',';
  };
  switch (p.id) {
    case CodecId::kQsgd:
      key("bits", p.bits);
      key("workers", p.max_workers);
      break;
    case CodecId::kTopk:
      key("density", shortest(p.density));
      key("select", p.select == TopkSelect::kExact ? "exact" : "threshold");
      key("values", p.values == ValueType::kFp16 ? "fp16" : "fp32");
      if (p.overlap > 0.0) key("overlap", shortest(p.overlap));
      if (p.first_pass == TopkFirstPass::kStaged) key("first_pass", "staged");
      break;
    case CodecId::kRandomk:
      key("density", shortest(p.density));
      break;
    case CodecId::kPowersgd:
      key("rank", p.rank);
      break;
    default:
      break;
  }
  if (codec_traits(p.id).lossy && !p.error_feedback) key("ef", 0);
  return out.str();
}

}  // namespace gradgate::kernels
