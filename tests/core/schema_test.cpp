// Tests for core/schema.*: validation of fields, with messages that name the field at fault.
#include "core/schema.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace replayd {
namespace {

using Catch::Matchers::Contains;

Field field(std::string name, DType dtype, std::vector<std::uint64_t> shape = {}) {
  return Field{std::move(name), dtype, std::move(shape)};
}

// The error of a schema that must be rejected.
Error rejection(std::vector<Field> fields) {
  auto schema = Schema::create(std::move(fields));
  REQUIRE_FALSE(schema.ok());
  return schema.error();
}

TEST_CASE("a valid schema reports its fields, their sizes and the item size") {
  auto schema = Schema::create({field("obs", DType::float32, {4, 84, 84}),
                                field("act", DType::int64), field("done", DType::boolean)});
  REQUIRE(schema.ok());
  CHECK(schema->size() == 3);
  CHECK(schema->field(0).elements() == 4 * 84 * 84);
  CHECK(schema->field(0).item_bytes() == 4 * 84 * 84 * 4);
  CHECK(schema->field(1).elements() == 1);  // a scalar has one element
  CHECK(schema->field(1).item_bytes() == 8);
  CHECK(schema->item_bytes() == 4 * 84 * 84 * 4 + 8 + 1);
  CHECK(schema->find("obs") == 0);
  CHECK(schema->find("done") == 2);
  CHECK(schema->find("reward") == -1);
  CHECK(schema->find("") == -1);
}

TEST_CASE("a schema with no fields is refused") {
  const auto error = rejection({});
  CHECK(error.code == ErrorCode::invalid_argument);
  CHECK_THAT(error.message, Contains("no fields"));
}

TEST_CASE("an empty field name is refused") {
  const auto error = rejection({field("obs", DType::float32), field("", DType::int32)});
  CHECK(error.code == ErrorCode::invalid_argument);
  CHECK_THAT(error.message, Contains("empty name"));
}

TEST_CASE("a duplicate field name is refused and named") {
  const auto error = rejection(
      {field("obs", DType::float32), field("act", DType::int32), field("obs", DType::uint8)});
  CHECK(error.code == ErrorCode::invalid_argument);
  CHECK_THAT(error.message, Contains("'obs'"));
  CHECK_THAT(error.message, Contains("more than once"));
}

TEST_CASE("a zero dimension is refused, naming the field and the dimension") {
  const auto error =
      rejection({field("obs", DType::float32, {4}), field("pixels", DType::uint8, {84, 0, 3})});
  CHECK(error.code == ErrorCode::invalid_argument);
  CHECK_THAT(error.message, Contains("'pixels'"));
  CHECK_THAT(error.message, Contains("dimension 1 is 0"));
}

TEST_CASE("more than kMaxDims dimensions are refused, naming the field") {
  const std::vector<std::uint64_t> at_limit(Schema::kMaxDims, 2);
  CHECK(Schema::create({field("deep", DType::uint8, at_limit)}).ok());

  const std::vector<std::uint64_t> too_many(Schema::kMaxDims + 1, 2);
  const auto error = rejection({field("deep", DType::uint8, too_many)});
  CHECK(error.code == ErrorCode::invalid_argument);
  CHECK_THAT(error.message, Contains("'deep'"));
  CHECK_THAT(error.message, Contains(std::to_string(Schema::kMaxDims + 1) + " dimensions"));
}

TEST_CASE("field names allow only letters, digits, '_', '.', '-' and '/', up to 64 characters") {
  CHECK(Schema::create({field("a.b-c_D9", DType::uint8)}).ok());
  CHECK(Schema::create({field("obs/camera", DType::uint8), field("obs/0", DType::uint8)}).ok());
  CHECK(Schema::create({field(std::string(Schema::kMaxNameChars, 'x'), DType::uint8)}).ok());

  const auto spaced = rejection({field("next obs", DType::uint8)});
  CHECK_THAT(spaced.message, Contains("'next obs'"));
  for (const char* path : {"/obs", "obs/", "obs//camera"}) {
    const auto empty_part = rejection({field(path, DType::uint8)});
    CHECK_THAT(empty_part.message, Contains(std::string("'") + path + "'"));
    CHECK_THAT(empty_part.message, Contains("nested field's path"));
  }
  const auto long_name = std::string(Schema::kMaxNameChars + 1, 'x');
  const auto too_long = rejection({field(long_name, DType::uint8)});
  CHECK_THAT(too_long.message, Contains(long_name));
  CHECK_THAT(too_long.message, Contains("longer than"));
}

TEST_CASE("a field whose item exceeds kMaxItemBytes is refused, naming the field") {
  // 2^28 float32 elements = 1 GiB exactly: allowed. One more row of 4 bytes is not.
  CHECK(Schema::create({field("big", DType::float32, {std::uint64_t{1} << 28})}).ok());
  const auto error = rejection({field("big", DType::float32, {(std::uint64_t{1} << 28) + 1})});
  CHECK(error.code == ErrorCode::invalid_argument);
  CHECK_THAT(error.message, Contains("'big'"));
  // Dimensions whose product overflows 64 bits must not wrap around into an accepted size.
  const auto huge =
      rejection({field("wrap", DType::uint8, {std::uint64_t{1} << 32, std::uint64_t{1} << 32})});
  CHECK_THAT(huge.message, Contains("'wrap'"));
}

TEST_CASE("more than kMaxFields fields are refused") {
  std::vector<Field> fields;
  for (std::size_t i = 0; i < Schema::kMaxFields; ++i) {
    std::string name = "f";  // not "f" + ...: g++ 12 gives a false -Wrestrict there
    name += std::to_string(i);
    fields.push_back(field(name, DType::uint8));
  }
  CHECK(Schema::create(fields).ok());
  fields.push_back(field("one_more", DType::uint8));
  const auto error = rejection(fields);
  CHECK(error.code == ErrorCode::invalid_argument);
  CHECK_THAT(error.message, Contains(std::to_string(Schema::kMaxFields + 1) + " fields"));
}

TEST_CASE("schemas compare equal exactly when their fields do") {
  auto a = Schema::create({field("obs", DType::float32, {4}), field("act", DType::int64)});
  auto b = Schema::create({field("obs", DType::float32, {4}), field("act", DType::int64)});
  auto c = Schema::create({field("obs", DType::float32, {5}), field("act", DType::int64)});
  REQUIRE((a.ok() && b.ok() && c.ok()));
  CHECK(*a == *b);
  CHECK_FALSE(*a == *c);
}

}  // namespace
}  // namespace replayd
