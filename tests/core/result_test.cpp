// Tests for core/result.*: a Result holds a value or an Error, the unwrap macros return the
// error from the enclosing function, and every error code has a stable printable name.
#include "core/result.h"

#include <catch2/catch.hpp>

#include <memory>
#include <set>
#include <string>

namespace replayd {
namespace {

Result<int> parse_positive(int value) {
  if (value <= 0) return make_error(ErrorCode::invalid_argument, "value must be positive");
  return value;
}

Result<int> doubled(int value) {
  REPLAYD_ASSIGN_OR_RETURN(const int checked, parse_positive(value));
  return checked * 2;
}

Status check_both(int a, int b) {
  REPLAYD_RETURN_IF_ERROR(parse_positive(a));
  REPLAYD_RETURN_IF_ERROR(parse_positive(b));
  return Ok{};
}

TEST_CASE("a result made from a value is ok and gives the value back") {
  Result<std::string> result(std::string("table"));
  REQUIRE(result.ok());
  CHECK(static_cast<bool>(result));
  CHECK(result.value() == "table");
  CHECK(*result == "table");
  CHECK(result->size() == 5);
  result->append("s");
  CHECK(result.value() == "tables");
}

TEST_CASE("a result made from an error is not ok and keeps its code and message") {
  Result<int> result = make_error(ErrorCode::not_found, "no table named 'x'");
  CHECK_FALSE(result.ok());
  CHECK_FALSE(static_cast<bool>(result));
  CHECK(result.error().code == ErrorCode::not_found);
  CHECK(result.error().message == "no table named 'x'");
}

TEST_CASE("the value of a result can be moved out, including move-only values") {
  Result<std::unique_ptr<int>> result(std::make_unique<int>(42));
  REQUIRE(result);
  std::unique_ptr<int> owned = std::move(result).value();
  REQUIRE(owned != nullptr);
  CHECK(*owned == 42);
}

TEST_CASE("REPLAYD_ASSIGN_OR_RETURN unwraps a value and returns an error unchanged") {
  auto good = doubled(21);
  REQUIRE(good);
  CHECK(*good == 42);
  auto bad = doubled(-1);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == ErrorCode::invalid_argument);
  CHECK(bad.error().message == "value must be positive");
}

TEST_CASE("REPLAYD_RETURN_IF_ERROR stops at the first error and a Status of Ok is success") {
  CHECK(check_both(1, 2).ok());
  auto failed = check_both(1, 0);
  REQUIRE_FALSE(failed);
  CHECK(failed.error().code == ErrorCode::invalid_argument);
  Status ok = Ok{};
  CHECK(ok.ok());
}

TEST_CASE("every error code has its own printable name") {
  const ErrorCode codes[] = {ErrorCode::invalid_argument,   ErrorCode::not_found,
                             ErrorCode::already_exists,     ErrorCode::would_block,
                             ErrorCode::resource_exhausted, ErrorCode::failed_precondition,
                             ErrorCode::unavailable};
  std::set<std::string> names;
  for (ErrorCode code : codes)
    names.insert(error_code_name(code));
  CHECK(names.size() == std::size(codes));
  CHECK(std::string(error_code_name(ErrorCode::invalid_argument)) == "invalid_argument");
  CHECK(std::string(error_code_name(ErrorCode::not_found)) == "not_found");
  CHECK(std::string(error_code_name(ErrorCode::already_exists)) == "already_exists");
  CHECK(std::string(error_code_name(ErrorCode::would_block)) == "would_block");
  CHECK(std::string(error_code_name(ErrorCode::resource_exhausted)) == "resource_exhausted");
  CHECK(std::string(error_code_name(ErrorCode::failed_precondition)) == "failed_precondition");
  CHECK(std::string(error_code_name(ErrorCode::unavailable)) == "unavailable");
  CHECK(std::string(error_code_name(static_cast<ErrorCode>(99))) == "unknown");
}

}  // namespace
}  // namespace replayd
