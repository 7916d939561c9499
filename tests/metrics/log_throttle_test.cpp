// Tests of metrics/log_throttle.h: a repeated line is logged once, then summarised.
#include "metrics/log_throttle.h"

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using replayd::metrics::LogThrottle;

TEST_CASE("a repeated line is logged once, then once per window with the count it hid") {
  LogThrottle throttle(10s);
  const LogThrottle::Clock::time_point start{};
  auto first = throttle.occur(start + 1s);
  REQUIRE(first);
  CHECK(first->suffix().empty());
  for (int i = 1; i <= 99; ++i)  // an accept error every 100 ms
    CHECK_FALSE(throttle.occur(start + 1s + i * 100ms));
  auto summary = throttle.occur(start + 11s);
  REQUIRE(summary);
  CHECK(summary->suppressed == 99);
  CHECK(summary->suffix() == " (99 more in the last 10 s)");
  CHECK_FALSE(throttle.occur(start + 12s));
  auto quiet_then_again = throttle.occur(start + 60s);
  REQUIRE(quiet_then_again);
  CHECK(quiet_then_again->suppressed == 1);
}
