#include "core/dtype.h"

#include <array>
#include <utility>

namespace replayd {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::size_t size;
};

constexpr std::array<DTypeInfo, 12> kDTypes{{
    {DType::boolean, "bool", 1},
    {DType::int8, "int8", 1},
    {DType::int16, "int16", 2},
    {DType::int32, "int32", 4},
    {DType::int64, "int64", 8},
    {DType::uint8, "uint8", 1},
    {DType::uint16, "uint16", 2},
    {DType::uint32, "uint32", 4},
    {DType::uint64, "uint64", 8},
    {DType::float16, "float16", 2},
    {DType::float32, "float32", 4},
    {DType::float64, "float64", 8},
}};

}  // namespace

std::size_t dtype_size(DType dtype) {
  return kDTypes[static_cast<std::size_t>(dtype)].size;
}

std::string_view dtype_name(DType dtype) {
  return kDTypes[static_cast<std::size_t>(dtype)].name;
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& info : kDTypes) {
    if (info.name == name) return info.dtype;
  }
  return std::nullopt;
}

}  // namespace replayd
