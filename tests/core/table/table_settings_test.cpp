// Tests of a table's settings changed at run time (core/table/table_settings.cpp): a new rate
// limiter on a preloaded table admits inserts and samples exactly as a reference model of
// the new limiter says (items stored before are not charged); a refused change leaves the
// table as it was; a new priority exponent makes draws follow priority^exponent.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/table/table.h"
#include "tests/core/chi_square.h"

namespace replayd {
namespace {

using Catch::Matchers::Contains;

std::unique_ptr<Table> make_table(std::uint32_t capacity, SelectorConfig sampler = {}) {
  TableConfig config;
  config.name = "demos";
  config.schema = Schema::create({Field{"id", DType::int64, {}}}).value();
  config.capacity = capacity;
  config.sampler = sampler;
  config.rate_limiter = RateLimiterConfig::min_size(1);
  config.seed = 7;
  auto table = Table::create(config);
  REQUIRE(table.ok());
  return std::move(table).value();
}

Status insert(Table& table, std::int64_t first, std::uint64_t n,
              const std::vector<double>& priorities = {}) {
  std::vector<std::int64_t> ids(n);
  for (std::uint64_t i = 0; i < n; ++i)
    ids[i] = first + static_cast<std::int64_t>(i);
  std::vector<std::span<const std::byte>> columns{std::as_bytes(std::span(ids))};
  std::vector<std::uint64_t> keys(n);
  return table.insert(columns, n, priorities, keys);
}

struct Drawn {
  Status status = Ok{};
  std::vector<std::int64_t> ids;
};

Drawn sample(Table& table, std::uint64_t n) {
  Drawn out;
  out.ids.resize(n);
  std::vector<std::uint64_t> keys(n);
  std::vector<double> probabilities(n), weights(n);
  std::vector<std::uint32_t> times(n);
  std::vector<std::span<std::byte>> columns{std::as_writable_bytes(std::span(out.ids))};
  out.status = table.sample(n, 0.0, SampleBuffers{keys, probabilities, weights, times, columns});
  return out;
}

// The reference: Reverb's rule for the new limiter, over counters that start where
// RateLimiter::reconfigure says (the diff at the middle of [min_diff, max_diff]).
struct LimiterModel {
  double spi;
  double min_diff;
  double max_diff;
  std::int64_t min_size;
  double diff;         // I*spi - S
  std::uint64_t size;  // stored items
  bool may_sample(std::uint64_t n) const {
    return static_cast<std::int64_t>(size) >= min_size && diff - static_cast<double>(n) >= min_diff;
  }
  bool may_insert(std::uint64_t n) const {
    return static_cast<std::int64_t>(size + n) <= min_size ||
           diff + spi * static_cast<double>(n) <= max_diff;
  }
};

}  // namespace

TEST_CASE("a rate limiter turned on after a preload admits exactly what the new limiter says") {
  constexpr std::uint32_t kPreloaded = 100000;
  auto table = make_table(kPreloaded + 1000);
  REQUIRE(insert(*table, 0, kPreloaded).ok());
  REQUIRE(sample(*table, 50).status.ok());  // the old limiter admits anything
  const auto ratio = RateLimiterConfig::sample_to_insert_ratio(2.0, 1000, 10.0);
  REQUIRE(table->set_rate_limiter(ratio).ok());
  CHECK(table->config().rate_limiter == ratio);
  LimiterModel model{
      2.0, ratio.min_diff, ratio.max_diff, 1000, (ratio.min_diff + ratio.max_diff) / 2, kPreloaded};
  // A scripted mix of inserts and samples of several sizes: each admitted exactly when the
  // model admits it, and the stored data unaffected.
  const std::uint64_t sizes[] = {1, 3, 4, 7, 1, 2, 9, 5, 1, 1, 6, 2, 3, 8, 1};
  std::int64_t next_id = kPreloaded;
  std::uint64_t admitted_samples = 0;
  for (int round = 0; round < 40; ++round) {
    for (std::uint64_t n : sizes) {
      const bool sample_turn = (round + static_cast<int>(n)) % 3 != 0;
      if (sample_turn) {
        const bool expected = model.may_sample(n);
        CHECK(table->may_sample(n) == expected);
        const Drawn drawn = sample(*table, n);
        CHECK(drawn.status.ok() == expected);
        if (expected) {
          model.diff -= static_cast<double>(n);
          admitted_samples += n;
        } else {
          CHECK(drawn.status.error().code == ErrorCode::would_block);
        }
      } else {
        const bool expected = model.may_insert(n);
        const Status inserted = insert(*table, next_id, n);
        CHECK(inserted.ok() == expected);
        if (expected) {
          model.diff += model.spi * static_cast<double>(n);
          model.size += n;
          next_id += static_cast<std::int64_t>(n);
        }
      }
    }
  }
  CHECK(admitted_samples > 0);
  CHECK(table->size() == model.size);
  // Right after the change, exactly 10 single samples (the error buffer) were free.
  auto fresh = make_table(kPreloaded);
  REQUIRE(insert(*fresh, 0, kPreloaded).ok());
  REQUIRE(fresh->set_rate_limiter(ratio).ok());
  int free_samples = 0;
  while (sample(*fresh, 1).status.ok())
    ++free_samples;
  CHECK(free_samples == 10);
  // Off again: everything samples.
  REQUIRE(fresh->set_rate_limiter(RateLimiterConfig::min_size(1)).ok());
  CHECK(sample(*fresh, 1000).status.ok());
}

TEST_CASE("a refused rate limiter or exponent leaves the table unchanged, naming the problem") {
  auto table = make_table(100);
  REQUIRE(insert(*table, 0, 10).ok());
  const RateLimiterConfig before = table->config().rate_limiter;
  auto too_large = table->set_rate_limiter(RateLimiterConfig::min_size(1000));
  REQUIRE_FALSE(too_large.ok());
  CHECK_THAT(too_large.error().message, Contains("min_size_to_sample"));
  RateLimiterConfig narrow = RateLimiterConfig::sample_to_insert_ratio(4.0, 1, 0.0);
  auto narrow_refused = table->set_rate_limiter(narrow);
  REQUIRE_FALSE(narrow_refused.ok());
  CHECK_THAT(narrow_refused.error().message, Contains("error buffer"));
  CHECK(table->config().rate_limiter == before);
  auto uniform = table->set_priority_exponent(0.5);
  REQUIRE_FALSE(uniform.ok());
  CHECK(uniform.error().code == ErrorCode::failed_precondition);
  auto prioritized = make_table(100, SelectorConfig{SelectorKind::prioritized, 0.6});
  auto negative = prioritized->set_priority_exponent(-1);
  REQUIRE_FALSE(negative.ok());
  CHECK_THAT(negative.error().message, Contains("priority_exponent"));
  CHECK(prioritized->config().sampler.priority_exponent == 0.6);
}

TEST_CASE("a new priority exponent makes draws follow priority^exponent, priorities kept") {
  auto table = make_table(8, SelectorConfig{SelectorKind::prioritized, 1.0});
  const std::vector<double> priorities{1, 2, 3, 4, 5, 6, 7, 8};
  REQUIRE(insert(*table, 0, 8, priorities).ok());
  REQUIRE(table->set_priority_exponent(2.0).ok());
  CHECK(table->config().sampler.priority_exponent == 2.0);
  std::vector<std::uint64_t> counts(8, 0);
  for (int i = 0; i < 200; ++i) {
    const Drawn drawn = sample(*table, 1000);
    REQUIRE(drawn.status.ok());
    for (auto id : drawn.ids)
      ++counts[static_cast<std::size_t>(id)];
  }
  std::vector<double> expected;
  double total = 0;
  for (double p : priorities)
    total += p * p;
  for (double p : priorities)
    expected.push_back(p * p / total);
  const auto test = testing::chi_square(counts, expected);
  INFO("chi-square " << test.statistic << " critical " << test.critical);
  CHECK(test.passes());
  for (std::uint32_t slot = 0; slot < 8; ++slot) {
    if (!table->storage().occupied(slot)) continue;
    std::int64_t id = 0;
    std::memcpy(&id, table->storage().cell(0, slot), sizeof id);
    CHECK(table->storage().priority(slot) == priorities[static_cast<std::size_t>(id)]);
  }
}

}  // namespace replayd
