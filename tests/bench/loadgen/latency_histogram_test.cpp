#include "latency_histogram.h"

#include <catch2/catch.hpp>
#include <cstdint>

using replayd::loadgen::LatencyHistogram;

TEST_CASE("latency quantiles are within 6.25% of the recorded values", "[loadgen]") {
  LatencyHistogram histogram;
  for (std::uint64_t us = 1; us <= 1000; ++us)
    histogram.record(us * 1000);
  REQUIRE(histogram.count() == 1000);
  CHECK(histogram.quantile_us(0.5) == Approx(500).epsilon(0.0625));
  CHECK(histogram.quantile_us(0.99) == Approx(990).epsilon(0.0625));
  CHECK(histogram.quantile_us(0.999) == Approx(999).epsilon(0.0625));
  CHECK(histogram.quantile_us(0) == Approx(1).epsilon(0.0625));
}

TEST_CASE("small latencies are kept exactly and an empty histogram reports 0", "[loadgen]") {
  LatencyHistogram histogram;
  CHECK(histogram.quantile_us(0.5) == 0);
  for (int i = 0; i < 10; ++i)
    histogram.record(7);
  CHECK(histogram.quantile_us(0.5) == Approx(0.007));
}

TEST_CASE("merged histograms report the quantiles of all their latencies", "[loadgen]") {
  LatencyHistogram fast, slow;
  for (int i = 0; i < 900; ++i)
    fast.record(10'000);  // 10 us
  for (int i = 0; i < 100; ++i)
    slow.record(5'000'000);  // 5 ms
  fast.merge(slow);
  REQUIRE(fast.count() == 1000);
  CHECK(fast.quantile_us(0.5) == Approx(10).epsilon(0.0625));
  CHECK(fast.quantile_us(0.95) == Approx(5000).epsilon(0.0625));
}

TEST_CASE("latencies beyond the last bucket are counted, not lost", "[loadgen]") {
  LatencyHistogram histogram;
  histogram.record(~std::uint64_t{0});
  REQUIRE(histogram.count() == 1);
  CHECK(histogram.quantile_us(1.0) > 1e9);
}
