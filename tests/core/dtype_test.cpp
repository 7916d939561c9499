// Tests for core/dtype.*: the twelve numpy element types, their sizes and wire names.
#include "core/dtype.h"

#include <catch2/catch.hpp>

#include <set>
#include <string>

namespace replayd {
namespace {

struct Expected {
  DType dtype;
  const char* name;
  std::size_t size;
};

// numpy's names and itemsize for each dtype, written out independently of core/dtype.cpp.
constexpr Expected kExpected[] = {
    {DType::boolean, "bool", 1},    {DType::int8, "int8", 1},       {DType::int16, "int16", 2},
    {DType::int32, "int32", 4},     {DType::int64, "int64", 8},     {DType::uint8, "uint8", 1},
    {DType::uint16, "uint16", 2},   {DType::uint32, "uint32", 4},   {DType::uint64, "uint64", 8},
    {DType::float16, "float16", 2}, {DType::float32, "float32", 4}, {DType::float64, "float64", 8},
};

TEST_CASE("every dtype has numpy's name and item size") {
  for (const auto& expected : kExpected) {
    INFO("dtype " << expected.name);
    CHECK(dtype_name(expected.dtype) == expected.name);
    CHECK(dtype_size(expected.dtype) == expected.size);
  }
}

TEST_CASE("every dtype name parses back to the same dtype") {
  std::set<std::string> names;
  for (const auto& expected : kExpected) {
    const auto name = dtype_name(expected.dtype);
    names.emplace(name);
    const auto parsed = parse_dtype(name);
    INFO("dtype " << expected.name);
    REQUIRE(parsed.has_value());
    CHECK(*parsed == expected.dtype);
  }
  CHECK(names.size() == 12);  // no two dtypes share a name
}

TEST_CASE("names that are not one of the twelve dtypes are refused") {
  for (const char* name : {"", "float", "Float32", "float32 ", "bool_", "boolean", "int", "uint",
                           "complex64", "float128", "f4", "<f4"}) {
    INFO("name '" << name << "'");
    CHECK_FALSE(parse_dtype(name).has_value());
  }
}

}  // namespace
}  // namespace replayd
