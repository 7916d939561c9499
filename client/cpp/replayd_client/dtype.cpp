#include "replayd_client/dtype.h"

#include <array>

namespace replayd::client {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::size_t bytes;
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

static_assert(sizeof(bool) == 1 && sizeof(Float16Bits) == 2 && sizeof(float) == 4 &&
              sizeof(double) == 8);

}  // namespace

std::string_view dtype_name(DType dtype) {
  return kDTypes[static_cast<std::size_t>(dtype)].name;
}

std::size_t dtype_bytes(DType dtype) {
  return kDTypes[static_cast<std::size_t>(dtype)].bytes;
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& info : kDTypes) {
    if (info.name == name) return info.dtype;
  }
  return std::nullopt;
}

}  // namespace replayd::client
