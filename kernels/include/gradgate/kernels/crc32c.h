// CRC32C (Castagnoli), the frame checksum. Uses the SSE4.2 crc32 instruction when the CPU has it
// and a table otherwise; both give the same value. Kept here rather than taken from a library so
// that the kernels build with nothing but a compiler (the GPU build machines have no -dev
// packages).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace gradgate::kernels {

/// Extends `crc` (0 for a new checksum) over `data`.
uint32_t crc32c_extend(uint32_t crc, std::span<const std::byte> data);

inline uint32_t crc32c(std::span<const std::byte> data) { return crc32c_extend(0, data); }

}  // namespace gradgate::kernels
