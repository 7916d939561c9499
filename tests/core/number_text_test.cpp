// Tests for core/number_text.h: numbers in error messages are the shortest text that reads
// back as the same double, with readable names for NaN and infinities.
#include "core/number_text.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "core/rng.h"

namespace replayd {
namespace {

TEST_CASE("number_text prints the shortest text of common values") {
  CHECK(number_text(0.0) == "0");
  CHECK(number_text(1.0) == "1");
  CHECK(number_text(-2.5) == "-2.5");
  CHECK(number_text(0.99) == "0.99");
  CHECK(number_text(1e6) == "1000000");
}

TEST_CASE("number_text keeps tiny and nearly-one values that to_string would round away") {
  CHECK(number_text(-1e-300) == "-1e-300");
  CHECK(number_text(1.0000000000000002) == "1.0000000000000002");
  CHECK(number_text(5e-324) == "5e-324");
  CHECK(number_text(-0.0) == "-0");
}

TEST_CASE("number_text names NaN and the infinities") {
  CHECK(number_text(std::numeric_limits<double>::quiet_NaN()) == "NaN");
  CHECK(number_text(-std::numeric_limits<double>::quiet_NaN()) == "NaN");
  CHECK(number_text(std::numeric_limits<double>::infinity()) == "inf");
  CHECK(number_text(-std::numeric_limits<double>::infinity()) == "-inf");
}

TEST_CASE("number_text reads back as exactly the same double") {
  Rng rng(11);
  for (int i = 0; i < 2000; ++i) {
    double value;
    const std::uint64_t bits = rng.next();
    std::memcpy(&value, &bits, sizeof(value));
    if (!std::isfinite(value)) continue;
    const std::string text = number_text(value);
    REQUIRE(std::strtod(text.c_str(), nullptr) == value);
  }
  const double max = std::numeric_limits<double>::max();
  CHECK(std::strtod(number_text(max).c_str(), nullptr) == max);
  const double lowest = std::numeric_limits<double>::lowest();
  CHECK(std::strtod(number_text(lowest).c_str(), nullptr) == lowest);
}

}  // namespace
}  // namespace replayd
