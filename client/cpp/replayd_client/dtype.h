// Element types of columns, spelled as numpy names on the wire (docs/PROTOCOL.md, Columns),
// and the C++ types that map to them. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace replayd::client {

enum class DType : std::uint8_t {
  boolean,  // "bool": 1 byte, 0 or 1
  int8,
  int16,
  int32,
  int64,
  uint8,
  uint16,
  uint32,
  uint64,
  float16,
  float32,
  float64
};

// IEEE half-precision value as its raw bits; C++20 has no float16 type.
struct Float16Bits {
  std::uint16_t bits = 0;
  friend bool operator==(Float16Bits, Float16Bits) = default;
};

std::string_view dtype_name(DType dtype);
// The dtype for a numpy name; nullopt for anything else.
std::optional<DType> parse_dtype(std::string_view name);
std::size_t dtype_bytes(DType dtype);

template <typename T>
struct DTypeOf;  // undefined: the type has no wire dtype
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::boolean;
};
template <>
struct DTypeOf<std::int8_t> {
  static constexpr DType value = DType::int8;
};
template <>
struct DTypeOf<std::int16_t> {
  static constexpr DType value = DType::int16;
};
template <>
struct DTypeOf<std::int32_t> {
  static constexpr DType value = DType::int32;
};
template <>
struct DTypeOf<std::int64_t> {
  static constexpr DType value = DType::int64;
};
template <>
struct DTypeOf<std::uint8_t> {
  static constexpr DType value = DType::uint8;
};
template <>
struct DTypeOf<std::uint16_t> {
  static constexpr DType value = DType::uint16;
};
template <>
struct DTypeOf<std::uint32_t> {
  static constexpr DType value = DType::uint32;
};
template <>
struct DTypeOf<std::uint64_t> {
  static constexpr DType value = DType::uint64;
};
template <>
struct DTypeOf<Float16Bits> {
  static constexpr DType value = DType::float16;
};
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::float32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::float64;
};

template <typename T>
inline constexpr DType dtype_of = DTypeOf<T>::value;

}  // namespace replayd::client
