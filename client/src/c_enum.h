// The integer a C caller passed where the C API names an enum.
#pragma once

#include <cstring>
#include <type_traits>

namespace gradgate::client_impl {

/// C lets any int travel in an enum parameter (a ctypes binding, a caller's own constant), but in
/// C++ reading a value outside the enumerators' range is undefined. The checks of such an
/// argument read its bytes as the int they are instead of the enum.
template <typename Enum>
int c_enum_value(const Enum& argument) {
  static_assert(std::is_enum_v<Enum> && sizeof(Enum) == sizeof(int));
  int value = 0;
  std::memcpy(&value, &argument, sizeof value);
  return value;
}

}  // namespace gradgate::client_impl
