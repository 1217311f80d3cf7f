// Little-endian loads and stores of wire fields (frames, the gateways' envelopes and handshakes).
// The wire format is little-endian and so are all supported hosts (x86-64, aarch64), so a memcpy
// is the whole conversion.
#pragma once

#include <bit>
#include <cstddef>
#include <cstring>
#include <type_traits>

namespace gradgate::kernels::wire {

static_assert(std::endian::native == std::endian::little,
              "the wire format assumes a little-endian host");

template <typename T>
inline void store(std::byte* at, T value) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::memcpy(at, &value, sizeof(T));
}

template <typename T>
inline T load(const std::byte* at) {
  static_assert(std::is_trivially_copyable_v<T>);
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

}  // namespace gradgate::kernels::wire
