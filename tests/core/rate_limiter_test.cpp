// Tests for core/rate_limiter.*: truth tables for the presets with Reverb's semantics, the
// configurations refused at creation, and the batch checks that refuse impossible batches.
#include "core/table/rate_limiter.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/rng.h"

namespace replayd {
namespace {

using Catch::Matchers::Contains;

RateLimiter make(const RateLimiterConfig& config) {
  auto limiter = RateLimiter::create(config);
  INFO((limiter.ok() ? std::string() : limiter.error().message));
  REQUIRE(limiter.ok());
  return limiter.value();
}

Error rejection(const RateLimiterConfig& config) {
  auto limiter = RateLimiter::create(config);
  REQUIRE_FALSE(limiter.ok());
  return limiter.error();
}

enum class Op { insert, sample };

struct Row {
  std::uint64_t inserts, samples, deletes;
  Op op;
  std::uint64_t n;
  bool allowed;
};

void check_truth_table(const RateLimiterConfig& config, const std::vector<Row>& rows) {
  RateLimiter limiter = make(config);
  for (const auto& row : rows) {
    limiter.set_counters({row.inserts, row.samples, row.deletes});
    INFO("I=" << row.inserts << " S=" << row.samples << " D=" << row.deletes << " "
              << (row.op == Op::insert ? "insert " : "sample ") << row.n);
    const bool allowed =
        row.op == Op::insert ? limiter.may_insert(row.n) : limiter.may_sample(row.n);
    CHECK(allowed == row.allowed);
  }
}

constexpr auto kInsert = Op::insert;
constexpr auto kSample = Op::sample;

TEST_CASE("min_size: a sample is refused until min_size_to_sample items exist") {
  const auto config = RateLimiterConfig::min_size(3);
  CHECK(config.samples_per_insert == 1.0);
  CHECK(config.min_size_to_sample == 3);
  check_truth_table(config, {
                                {0, 0, 0, kSample, 1, false},
                                {2, 0, 0, kSample, 1, false},
                                {3, 0, 0, kSample, 1, true},
                                {3, 0, 0, kSample, 1000000, true},  // no ratio to keep
                                {4, 0, 1, kSample, 1, true},
                                {3, 0, 1, kSample, 1, false},  // a delete brings size to 2
                                {0, 0, 0, kInsert, 1000, true},
                                {3, 1000000, 0, kInsert, 1, true},  // inserts never held back
                                {100, 0, 0, kInsert, 100000, true},
                            });
}

TEST_CASE("sample_to_insert_ratio keeps I*spi - S within spi*min_size +/- error_buffer") {
  // spi 2, min size 3, buffer 4: min_diff = 6 - 4 = 2, max_diff = 6 + 4 = 10.
  const auto config = RateLimiterConfig::sample_to_insert_ratio(2.0, 3, 4.0);
  CHECK(config.min_diff == 2.0);
  CHECK(config.max_diff == 10.0);
  check_truth_table(
      config, {
                  // Before min size: sampling refused, inserts free.
                  {0, 0, 0, kSample, 1, false},
                  {2, 0, 0, kSample, 1, false},
                  {0, 0, 0, kInsert, 3, true},   // size 3 <= min size: free
                  {0, 0, 0, kInsert, 5, true},   // diff 10 <= 10
                  {0, 0, 0, kInsert, 6, false},  // diff 12 > 10
                                                 // At min size: diff 6.
                  {3, 0, 0, kSample, 1, true},   // 6 - 1 = 5 >= 2
                  {3, 0, 0, kSample, 4, true},   // 6 - 4 = 2 >= 2
                  {3, 0, 0, kSample, 5, false},  // 6 - 5 = 1 < 2
                  {3, 0, 0, kInsert, 2, true},   // 10 <= 10
                  {3, 0, 0, kInsert, 3, false},  // 12 > 10
                                                 // Sampled down to diff 2: only inserts may go.
                  {3, 4, 0, kSample, 1, false},
                  {3, 4, 0, kInsert, 1, true},
                  // Inserted up to diff 10: only samples may go.
                  {5, 0, 0, kInsert, 1, false},
                  {5, 0, 0, kSample, 8, true},
                  // Deletes shrink size below min size: sampling stops and
                  // inserts are free again while size stays <= min size.
                  {5, 0, 3, kSample, 1, false},
                  {5, 0, 3, kInsert, 1, true},   // size 3, although diff 12 > 10
                  {5, 0, 3, kInsert, 2, false},  // size 4 and diff 14 > 10
                  {6, 3, 1, kInsert, 1, false},  // 14 - 3 = 11 > 10
                  {6, 3, 1, kSample, 1, true},   // 12 - 4 = 8 >= 2
              });
}

TEST_CASE("queue(n) holds at most n items between inserts and samples") {
  const auto config = RateLimiterConfig::queue(2);
  CHECK(config == RateLimiterConfig{1.0, 1, 0.0, 2.0});
  check_truth_table(config, {
                                {0, 0, 0, kSample, 1, false},
                                {0, 0, 0, kInsert, 2, true},
                                {0, 0, 0, kInsert, 3, false},
                                {1, 0, 0, kSample, 1, true},
                                {1, 0, 0, kSample, 2, false},  // only one item is queued
                                {2, 0, 0, kInsert, 1, false},  // queue full
                                {2, 0, 0, kSample, 2, true},
                                {2, 0, 0, kSample, 3, false},
                                {2, 1, 1, kInsert, 1, true},  // one slot free again
                                {2, 1, 1, kInsert, 2, false},
                                {2, 2, 2, kSample, 1, false},  // drained
                                {2, 2, 2, kInsert, 2, true},
                                {2, 2, 2, kInsert, 3, false},
                            });
}

TEST_CASE("may_insert and may_sample follow the documented formulas on every state of a grid") {
  const std::vector<RateLimiterConfig> configs{
      RateLimiterConfig::min_size(4),
      RateLimiterConfig::queue(5),
      RateLimiterConfig::sample_to_insert_ratio(0.5, 6, 2.0),
      RateLimiterConfig::sample_to_insert_ratio(3.0, 2, 4.5),
      RateLimiterConfig{1.5, 5, -3.0, 20.0},
  };
  for (const auto& config : configs) {
    RateLimiter limiter = make(config);
    const double spi = config.samples_per_insert;
    const auto k = static_cast<std::uint64_t>(config.min_size_to_sample);
    for (std::uint64_t inserts = 0; inserts <= 12; ++inserts) {
      for (std::uint64_t deletes = 0; deletes <= inserts; ++deletes) {
        for (std::uint64_t samples = 0; samples <= 40; samples += 3) {
          limiter.set_counters({inserts, samples, deletes});
          const std::uint64_t size = inserts - deletes;
          for (std::uint64_t n = 1; n <= 8; ++n) {
            INFO("spi " << spi << " k " << k << " I=" << inserts << " S=" << samples
                        << " D=" << deletes << " n=" << n);
            const bool insert_expected = size + n <= k || static_cast<double>(inserts + n) * spi -
                                                                  static_cast<double>(samples) <=
                                                              config.max_diff;
            const bool sample_expected = size >= k && static_cast<double>(inserts) * spi -
                                                              static_cast<double>(samples + n) >=
                                                          config.min_diff;
            REQUIRE(limiter.may_insert(n) == insert_expected);
            REQUIRE(limiter.may_sample(n) == sample_expected);
          }
        }
      }
    }
  }
}

TEST_CASE("recorded inserts, samples and deletes move the limiter, and reset forgets them") {
  RateLimiter limiter = make(RateLimiterConfig::queue(2));
  limiter.record_inserts(2);
  CHECK_FALSE(limiter.may_insert(1));
  CHECK(limiter.may_sample(2));
  limiter.record_samples(1);
  CHECK(limiter.may_insert(1));
  limiter.record_deletes(1);
  CHECK(limiter.counters() == RateLimiterCounters{2, 1, 1});
  limiter.record_samples(1);
  limiter.record_deletes(1);
  CHECK_FALSE(limiter.may_sample(1));  // size 0
  limiter.reset();
  CHECK(limiter.counters() == RateLimiterCounters{});
  CHECK(limiter.may_insert(2));
  CHECK_FALSE(limiter.may_insert(3));
}

TEST_CASE("a non-positive, infinite or NaN samples_per_insert is refused by name") {
  for (double spi : {0.0, -1.0, HUGE_VAL, std::nan("")}) {
    INFO("spi " << spi);
    const auto error = rejection(RateLimiterConfig{spi, 1, -HUGE_VAL, HUGE_VAL});
    CHECK(error.code == ErrorCode::invalid_argument);
    CHECK_THAT(error.message, Contains("samples_per_insert"));
  }
}

TEST_CASE("a min_size_to_sample below 1 is refused by name") {
  for (std::int64_t k : {0, -5}) {
    const auto error = rejection(RateLimiterConfig::min_size(k));
    CHECK(error.code == ErrorCode::invalid_argument);
    CHECK_THAT(error.message, Contains("min_size_to_sample"));
  }
}

TEST_CASE("a NaN min_diff or max_diff is refused") {
  for (auto config : {RateLimiterConfig{1.0, 1, std::nan(""), 10.0},
                      RateLimiterConfig{1.0, 1, 0.0, std::nan("")}}) {
    const auto error = rejection(config);
    CHECK(error.code == ErrorCode::invalid_argument);
    CHECK_THAT(error.message, Contains("NaN"));
  }
}

TEST_CASE("min_diff greater than max_diff is refused") {
  const auto error = rejection(RateLimiterConfig{1.0, 1, 5.0, 4.0});
  CHECK(error.code == ErrorCode::invalid_argument);
  CHECK_THAT(error.message, Contains("min_diff (5) is greater than max_diff (4)"));
}

TEST_CASE("an error buffer narrower than max(1, samples_per_insert) is refused") {
  // spi 3 needs a span of 3; a buffer of 1 either side spans only 2.
  const auto wide_spi = rejection(RateLimiterConfig::sample_to_insert_ratio(3.0, 10, 1.0));
  CHECK(wide_spi.code == ErrorCode::invalid_argument);
  CHECK_THAT(wide_spi.message, Contains("narrower than max(1, samples_per_insert) = 3"));
  // spi 0.5 still needs a span of 1.
  const auto small_spi = rejection(RateLimiterConfig{0.5, 1, 0.0, 0.9});
  CHECK_THAT(small_spi.message, Contains("narrower"));
  // A queue of 0 items.
  CHECK_THAT(rejection(RateLimiterConfig::queue(0)).message, Contains("narrower"));
  // Exactly wide enough is fine.
  make(RateLimiterConfig::sample_to_insert_ratio(3.0, 10, 1.5));
  make(RateLimiterConfig::queue(1));
}

TEST_CASE("an error buffer pinned at one infinity is refused as empty, not accepted") {
  // [inf, inf] would never allow a sample and [-inf, -inf] never an insert past min size;
  // inf - inf is NaN, which must not slip past the width check.
  for (double bound : {HUGE_VAL, -HUGE_VAL}) {
    INFO("bound " << bound);
    const auto error = rejection(RateLimiterConfig{1.0, 1, bound, bound});
    CHECK(error.code == ErrorCode::invalid_argument);
    CHECK_THAT(error.message, Contains("narrower"));
  }
}

TEST_CASE("a configuration that deadlocks right after min_size inserts is refused") {
  // spi 1, min size 5, buffer 0.6: the span 1.2 is wide enough, but at diff 5 one more
  // insert needs 6 <= 5.6 and one sample needs 4 >= 4.4; neither can ever happen.
  const auto error = rejection(RateLimiterConfig::sample_to_insert_ratio(1.0, 5, 0.6));
  CHECK(error.code == ErrorCode::invalid_argument);
  CHECK_THAT(error.message, Contains("after min_size_to_sample = 5 inserts"));
  CHECK_THAT(error.message, Contains("neither an insert nor a sample"));
  // A buffer of 1 lets samples through at diff 5: accepted.
  make(RateLimiterConfig::sample_to_insert_ratio(1.0, 5, 1.0));
}

TEST_CASE("a batch larger than the error buffer could ever admit is refused") {
  RateLimiter queue = make(RateLimiterConfig::queue(10));
  const auto sample = queue.check_sample_batch(32);
  REQUIRE_FALSE(sample.ok());
  CHECK(sample.error().code == ErrorCode::invalid_argument);
  CHECK_THAT(sample.error().message, Contains("sample of 32 items"));
  CHECK(queue.check_sample_batch(10).ok());
  const auto insert = queue.check_insert_batch(11);
  REQUIRE_FALSE(insert.ok());
  CHECK_THAT(insert.error().message, Contains("insert of 11 items"));
  CHECK(queue.check_insert_batch(10).ok());

  RateLimiter ratio = make(RateLimiterConfig::sample_to_insert_ratio(2.0, 3, 4.0));  // [2, 10]
  CHECK_FALSE(ratio.check_sample_batch(9).ok());
  CHECK(ratio.check_sample_batch(8).ok());
  CHECK(ratio.check_insert_batch(3).ok());  // below min size every insert is free
  CHECK(ratio.check_insert_batch(5).ok());  // diff 0 -> 10
  CHECK_FALSE(ratio.check_insert_batch(6).ok());

  RateLimiter unbounded = make(RateLimiterConfig::min_size(7));
  CHECK(unbounded.check_sample_batch(1000000).ok());
  CHECK(unbounded.check_insert_batch(1000000).ok());
}

TEST_CASE("a batch the limiter admits right now is never refused as impossible") {
  // Insert 11 into an empty ratio limiter with min_diff 8: diff goes 0 -> 11 <= 12.
  RateLimiter ratio = make(RateLimiterConfig::sample_to_insert_ratio(1.0, 10, 2.0));
  REQUIRE(ratio.may_insert(11));
  CHECK(ratio.check_insert_batch(11).ok());
  // min size 100 above max_diff 10: right after 100 free inserts the diff is 100.
  RateLimiter high = make(RateLimiterConfig{1.0, 100, 0.0, 10.0});
  high.record_inserts(100);
  REQUIRE(high.may_sample(50));
  CHECK(high.check_sample_batch(50).ok());
  CHECK_FALSE(high.check_sample_batch(101).ok());
}

TEST_CASE(
    "along random walks without deletes, may_* admitting a batch implies check_* accepts it") {
  const std::vector<RateLimiterConfig> configs{
      RateLimiterConfig::queue(5),
      RateLimiterConfig::sample_to_insert_ratio(1.0, 10, 2.0),
      RateLimiterConfig::sample_to_insert_ratio(4.0, 3, 6.0),
      RateLimiterConfig::sample_to_insert_ratio(0.25, 20, 1.0),
      RateLimiterConfig{1.0, 30, 0.0, 8.0},
      RateLimiterConfig{2.0, 4, -6.0, 3.0},
  };
  Rng rng(31);
  for (const auto& config : configs) {
    RateLimiter limiter = make(config);
    for (int step = 0; step < 3000; ++step) {
      for (std::uint64_t n = 1; n <= 64; ++n) {
        INFO("config spi " << config.samples_per_insert << " step " << step << " n " << n);
        if (limiter.may_insert(n)) REQUIRE(limiter.check_insert_batch(n).ok());
        if (limiter.may_sample(n)) REQUIRE(limiter.check_sample_batch(n).ok());
      }
      const std::uint64_t n = 1 + rng.uniform_below(rng.uniform_below(4) == 0 ? 40 : 4);
      if (rng.uniform_below(2) == 0) {
        if (limiter.may_insert(n)) limiter.record_inserts(n);
      } else if (limiter.may_sample(n)) {
        limiter.record_samples(n);
      }
    }
  }
}

}  // namespace
}  // namespace replayd
