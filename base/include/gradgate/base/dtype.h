// The element types a worker's tensor may have: one enum for the C API (gg_dtype), the ingress
// protocol, the gateway and the controller's reports, numbered as on the wire.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace gradgate {

enum class Dtype : uint8_t { kFp32 = 0, kFp16 = 1, kBf16 = 2 };

/// Bytes per element.
constexpr size_t dtype_bytes(Dtype dtype) { return dtype == Dtype::kFp32 ? 4 : 2; }

/// "fp32", "fp16" or "bf16": the names of reports and logs.
constexpr std::string_view dtype_name(Dtype dtype) {
  return dtype == Dtype::kFp32 ? "fp32" : dtype == Dtype::kFp16 ? "fp16" : "bf16";
}

/// The dtype a wire byte or a report's name stands for; none for anything else.
constexpr std::optional<Dtype> dtype_from_wire(uint8_t value) {
  if (value > static_cast<uint8_t>(Dtype::kBf16)) return std::nullopt;
  return static_cast<Dtype>(value);
}
constexpr std::optional<Dtype> dtype_from_name(std::string_view name) {
  for (const Dtype dtype : {Dtype::kFp32, Dtype::kFp16, Dtype::kBf16}) {
    if (dtype_name(dtype) == name) return dtype;
  }
  return std::nullopt;
}

}  // namespace gradgate
