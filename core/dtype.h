// Element types a field can hold, their sizes and their wire names (numpy's names:
// "float32", "uint8", ... and "bool"). Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace replayd {

enum class DType {
  boolean,
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

// Size of one element in bytes (bool is one byte, as in numpy).
std::size_t dtype_size(DType dtype);

// The numpy name ("float32", "bool", ...). Never empty.
std::string_view dtype_name(DType dtype);

// Parses a numpy name; nullopt when the name is not one of the twelve above.
std::optional<DType> parse_dtype(std::string_view name);

}  // namespace replayd
