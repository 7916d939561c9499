// Tests for core/table.*: eviction order, expiry after max_times_sampled, queue semantics,
// stale keys, priority validation and defaults, input validation with the table unchanged,
// rate-limiter refusals, byte-exact sampling, reset and info counters.
#include "core/table/table.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace replayd {
namespace {

using Catch::Matchers::Contains;

// Items of the order tests carry an int64 "id" (and an obs and a reward to have several
// columns); the id says which item a sample returned.
Schema id_schema() {
  auto schema = Schema::create({Field{"id", DType::int64, {}}, Field{"obs", DType::float32, {3}},
                                Field{"rew", DType::float32, {}}});
  REQUIRE(schema.ok());
  return schema.value();
}

TableConfig id_config(std::uint32_t capacity) {
  TableConfig config;
  config.name = "replay";
  config.schema = id_schema();
  config.capacity = capacity;
  config.sampler = SelectorConfig{SelectorKind::uniform, 0.6};
  config.remover = SelectorKind::fifo;
  config.rate_limiter = RateLimiterConfig::min_size(1);
  config.seed = 42;
  return config;
}

std::unique_ptr<Table> make_table(const TableConfig& config) {
  auto table = Table::create(config);
  INFO((table.ok() ? std::string() : table.error().message));
  REQUIRE(table.ok());
  return std::move(table).value();
}

// Column bytes for items with the given ids, in the id schema.
struct IdColumns {
  std::vector<std::int64_t> id;
  std::vector<float> obs;
  std::vector<float> rew;
  std::vector<std::span<const std::byte>> spans;

  explicit IdColumns(const std::vector<std::int64_t>& ids) : id(ids) {
    for (auto value : ids) {
      for (int j = 0; j < 3; ++j)
        obs.push_back(static_cast<float>(value) + 0.25f * j);
      rew.push_back(-static_cast<float>(value));
    }
    spans = {std::as_bytes(std::span(id)), std::as_bytes(std::span(obs)),
             std::as_bytes(std::span(rew))};
  }
};

struct Inserted {
  Status status;
  std::vector<std::uint64_t> keys;
};

Inserted insert_ids(Table& table, const std::vector<std::int64_t>& ids,
                    const std::vector<double>& priorities = {}) {
  IdColumns columns(ids);
  std::vector<std::uint64_t> keys(ids.size(), 0);
  Status status = table.insert(columns.spans, ids.size(), priorities, keys);
  return Inserted{std::move(status), std::move(keys)};
}

std::vector<std::uint64_t> insert_ok(Table& table, const std::vector<std::int64_t>& ids,
                                     const std::vector<double>& priorities = {}) {
  auto inserted = insert_ids(table, ids, priorities);
  INFO((inserted.status.ok() ? std::string() : inserted.status.error().message));
  REQUIRE(inserted.status.ok());
  return inserted.keys;
}

struct Sampled {
  Status status = Ok{};
  std::vector<std::uint64_t> keys;
  std::vector<double> probabilities;
  std::vector<double> weights;
  std::vector<std::uint32_t> times_sampled;
  std::vector<std::int64_t> ids;
};

Sampled sample(Table& table, std::uint64_t n, double beta = 0.0) {
  Sampled out;
  out.keys.resize(n);
  out.probabilities.resize(n);
  out.weights.resize(n);
  out.times_sampled.resize(n);
  out.ids.resize(n);
  std::vector<float> obs(3 * n);
  std::vector<float> rew(n);
  std::vector<std::span<std::byte>> columns{std::as_writable_bytes(std::span(out.ids)),
                                            std::as_writable_bytes(std::span(obs)),
                                            std::as_writable_bytes(std::span(rew))};
  out.status = table.sample(
      n, beta, SampleBuffers{out.keys, out.probabilities, out.weights, out.times_sampled, columns});
  if (out.status.ok()) {
    for (std::uint64_t i = 0; i < n; ++i) {  // every column of a row belongs to the same item
      REQUIRE(obs[3 * i + 2] == static_cast<float>(out.ids[i]) + 0.5f);
      REQUIRE(rew[i] == -static_cast<float>(out.ids[i]));
    }
  }
  return out;
}

Sampled sample_ok(Table& table, std::uint64_t n, double beta = 0.0) {
  Sampled out = sample(table, n, beta);
  INFO((out.status.ok() ? std::string() : out.status.error().message));
  REQUIRE(out.status.ok());
  return out;
}

// The ids of the stored items, read straight from storage.
std::set<std::int64_t> stored_ids(const Table& table) {
  std::set<std::int64_t> ids;
  const Storage& storage = table.storage();
  for (std::uint32_t slot = 0; slot < storage.capacity(); ++slot) {
    if (!storage.occupied(slot)) continue;
    std::int64_t id = 0;
    std::memcpy(&id, storage.cell(0, slot), sizeof id);
    ids.insert(id);
  }
  return ids;
}

// Everything observable about a table, to check that a failed call changed nothing.
struct Observed {
  TableCounters counters;
  RateLimiterCounters limiter;
  std::uint64_t size;
  double max_priority;
  Rng::State rng;
  std::vector<std::uint64_t> keys;  // per slot, 0 when free
  std::vector<double> priorities;
  std::vector<std::uint32_t> times_sampled;
  bool operator==(const Observed&) const = default;
};

Observed observe(const Table& table) {
  const TableInfo info = table.info();
  Observed observed{info.counters,
                    info.rate_limiter,
                    info.size,
                    info.max_priority,
                    table.rng().state(),
                    {},
                    {},
                    {}};
  const Storage& storage = table.storage();
  for (std::uint32_t slot = 0; slot < storage.capacity(); ++slot) {
    const bool occupied = storage.occupied(slot);
    observed.keys.push_back(occupied ? storage.key(slot) : 0);
    observed.priorities.push_back(occupied ? storage.priority(slot) : 0);
    observed.times_sampled.push_back(occupied ? storage.times_sampled(slot) : 0);
  }
  return observed;
}

TEST_CASE("a FIFO remover evicts the oldest item when the table is full") {
  auto table = make_table(id_config(3));
  std::vector<std::uint64_t> keys;
  for (std::int64_t id = 1; id <= 5; ++id)
    keys.push_back(insert_ok(*table, {id})[0]);
  CHECK(stored_ids(*table) == std::set<std::int64_t>{3, 4, 5});
  CHECK(table->info().counters.evictions == 2);
  CHECK(table->size() == 3);
  insert_ok(*table, {6, 7});  // a batch evicts one per item, still oldest first
  CHECK(stored_ids(*table) == std::set<std::int64_t>{5, 6, 7});
  CHECK_FALSE(table->storage().find(keys[0]).has_value());
  CHECK(table->storage().find(keys[4]).has_value());
}

TEST_CASE("a LIFO remover evicts the newest item when the table is full") {
  auto config = id_config(3);
  config.remover = SelectorKind::lifo;
  auto table = make_table(config);
  insert_ok(*table, {1, 2, 3});
  insert_ok(*table, {4});
  CHECK(stored_ids(*table) == std::set<std::int64_t>{1, 2, 4});
  insert_ok(*table, {5});
  CHECK(stored_ids(*table) == std::set<std::int64_t>{1, 2, 5});
  CHECK(table->info().counters.evictions == 2);
}

TEST_CASE("a min_heap remover evicts the lowest priority item, the oldest among equals") {
  auto config = id_config(3);
  config.remover = SelectorKind::min_heap;
  auto table = make_table(config);
  const auto keys = insert_ok(*table, {1, 2, 3}, {5.0, 1.0, 1.0});
  insert_ok(*table, {4}, {9.0});
  CHECK(stored_ids(*table) == std::set<std::int64_t>{1, 3, 4});  // 2 and 3 tie: 2 is older
  REQUIRE(table->update_priorities(std::vector<std::uint64_t>{keys[0]}, std::vector{0.5}).ok());
  insert_ok(*table, {5}, {2.0});
  CHECK(stored_ids(*table) == std::set<std::int64_t>{3, 4, 5});  // 1 now has the lowest
}

TEST_CASE("a prioritized remover evicts in proportion to priority, never a zero priority") {
  // Each round: items 0, 1 and 3 with priorities 0, 1 and 3 fill the table, and one more
  // insert evicts item 1 with P = 1/4 or item 3 with P = 3/4 (exponent 1), never item 0.
  auto config = id_config(3);
  config.remover = SelectorKind::prioritized;
  auto table = make_table(config);
  const int rounds = 4000;
  int evicted_1 = 0;
  for (int round = 0; round < rounds; ++round) {
    table->reset();  // keeps the RNG running: rounds are independent draws
    insert_ok(*table, {0, 1, 3}, {0.0, 1.0, 3.0});
    insert_ok(*table, {9}, {1.0});
    const auto ids = stored_ids(*table);
    REQUIRE(ids.count(0) == 1);
    REQUIRE(ids.count(9) == 1);
    if (ids.count(1) == 0) ++evicted_1;
  }
  // Binomial(4000, 1/4): mean 1000, sd 27.4; 5 sd either side.
  CHECK(evicted_1 > 1000 - 137);
  CHECK(evicted_1 < 1000 + 137);
}

TEST_CASE("a remover refuses a priority whose mass would overflow, like a sampler") {
  auto config = id_config(4);
  config.remover = SelectorKind::prioritized;
  auto table = make_table(config);
  auto inserted = insert_ids(*table, {1}, {1e308});
  REQUIRE_FALSE(inserted.status.ok());
  CHECK_THAT(inserted.status.error().message, Contains("remover"));
  CHECK(table->size() == 0);
}

TEST_CASE("a uniform remover keeps the table at capacity, evicting one item per insert") {
  auto config = id_config(4);
  config.remover = SelectorKind::uniform;
  auto table = make_table(config);
  for (std::int64_t id = 0; id < 100; ++id)
    insert_ok(*table, {id});
  CHECK(table->size() == 4);
  CHECK(table->info().counters.evictions == 96);
  CHECK(stored_ids(*table).size() == 4);
  CHECK(stored_ids(*table) != std::set<std::int64_t>{96, 97, 98, 99});  // not FIFO
}

TEST_CASE("an item is removed after max_times_sampled samples") {
  auto config = id_config(4);
  config.max_times_sampled = 3;
  auto table = make_table(config);
  insert_ok(*table, {10, 11, 12, 13});
  std::map<std::uint64_t, std::uint32_t> draws;
  auto account = [&](const Sampled& out) {
    for (std::size_t i = 0; i < out.keys.size(); ++i) {
      const std::uint32_t count = ++draws[out.keys[i]];
      REQUIRE(out.times_sampled[i] == count);  // the count including this sample
      REQUIRE(count <= 3);
    }
    for (const auto& [key, count] : draws) {  // an item's third draw removed it
      REQUIRE(table->storage().find(key).has_value() == (count < 3));
    }
  };
  account(sample_ok(*table, 5));
  account(sample_ok(*table, 5));
  // Two draws are left among the remaining items: a sample of 3 must wait, 2 may go.
  CHECK_FALSE(table->may_sample(3));
  CHECK(sample(*table, 3).status.error().code == ErrorCode::would_block);
  account(sample_ok(*table, 2));
  CHECK(table->size() == 0);
  CHECK(draws.size() == 4);
  CHECK(table->info().counters.expirations == 4);
  CHECK(table->info().rate_limiter.deletes == 4);
  CHECK_FALSE(table->may_sample(1));
  CHECK(sample(*table, 1).status.error().code == ErrorCode::would_block);
  // A sample that exceeds capacity x max_times_sampled could never be served.
  const auto too_many = sample(*table, 13);
  CHECK(too_many.status.error().code == ErrorCode::invalid_argument);
}

TEST_CASE("a queue table returns every item exactly once, in insertion order") {
  // Queue semantics: FIFO sampler, max_times_sampled 1, queue(10) rate limiter.
  auto config = id_config(64);
  config.sampler = SelectorConfig{SelectorKind::fifo, 1.0};
  config.max_times_sampled = 1;
  config.rate_limiter = RateLimiterConfig::queue(10);
  auto table = make_table(config);
  Rng rng(2718);
  std::int64_t next_insert = 0;
  std::int64_t next_expected = 0;
  int blocked_inserts = 0;
  int blocked_samples = 0;
  for (int step = 0; step < 20000; ++step) {
    const auto n = static_cast<std::int64_t>(1 + rng.uniform_below(4));
    const std::int64_t queued = next_insert - next_expected;
    INFO("step " << step << " n " << n << " queued " << queued);
    if (rng.uniform_below(2) == 0) {
      std::vector<std::int64_t> ids;
      for (std::int64_t i = 0; i < n; ++i)
        ids.push_back(next_insert + i);
      const auto before = observe(*table);
      const auto inserted = insert_ids(*table, ids);
      if (queued + n <= 10) {
        REQUIRE(inserted.status.ok());
        next_insert += n;
      } else {
        REQUIRE(inserted.status.error().code == ErrorCode::would_block);
        REQUIRE(observe(*table) == before);
        ++blocked_inserts;
      }
    } else {
      const Sampled out = sample(*table, static_cast<std::uint64_t>(n));
      if (n <= queued) {
        REQUIRE(out.status.ok());
        for (std::int64_t i = 0; i < n; ++i)
          REQUIRE(out.ids[i] == next_expected + i);
        next_expected += n;
      } else {
        REQUIRE(out.status.error().code == ErrorCode::would_block);
        ++blocked_samples;
      }
    }
    REQUIRE(table->size() == static_cast<std::uint64_t>(next_insert - next_expected));
  }
  CHECK(next_expected > 5000);
  CHECK(blocked_inserts > 100);
  CHECK(blocked_samples > 100);
  CHECK(table->info().counters.evictions == 0);
  // A sample larger than the queue could ever hold is refused outright, not held.
  const auto impossible = sample(*table, 32);
  CHECK(impossible.status.error().code == ErrorCode::invalid_argument);
  CHECK_THAT(impossible.status.error().message, Contains("sample of 32 items"));
}

TEST_CASE("priority updates and deletes of evicted keys are counted stale, never applied") {
  auto config = id_config(2);
  config.sampler = SelectorConfig{SelectorKind::prioritized, 1.0};
  auto table = make_table(config);
  const auto a = insert_ok(*table, {1}, {5.0})[0];
  insert_ok(*table, {2}, {1.0});
  const auto slot_of_a = *table->storage().find(a);
  const auto c = insert_ok(*table, {3}, {1.0})[0];  // evicts item 1
  REQUIRE_FALSE(table->storage().find(a).has_value());
  REQUIRE(table->storage().find(c) == slot_of_a);  // the newcomer took the same slot

  const auto updated =
      table->update_priorities(std::vector<std::uint64_t>{a}, std::vector<double>{100.0});
  REQUIRE(updated.ok());
  CHECK(updated->applied == 0);
  CHECK(updated->stale == 1);
  CHECK(table->storage().priority(slot_of_a) == 1.0);  // the newcomer kept its priority
  const auto out = sample_ok(*table, 200);
  for (double probability : out.probabilities)
    CHECK(probability == 0.5);

  const auto deleted = table->delete_keys(std::vector<std::uint64_t>{a});
  CHECK(deleted.deleted == 0);
  CHECK(deleted.stale == 1);
  CHECK(table->size() == 2);
  CHECK(stored_ids(*table) == std::set<std::int64_t>{2, 3});
  CHECK(table->info().counters.stale_updates == 1);
  CHECK(table->info().counters.stale_deletes == 1);
  CHECK(table->info().counters.priority_updates == 0);
  CHECK(table->info().counters.deletes == 0);
}

TEST_CASE("deleted items are never sampled again") {
  auto table = make_table(id_config(8));
  const auto keys = insert_ok(*table, {0, 1, 2, 3, 4});
  const auto deleted = table->delete_keys(std::vector<std::uint64_t>{keys[1], keys[3], keys[1]});
  CHECK(deleted.deleted == 2);
  CHECK(deleted.stale == 1);  // the repeated key is gone by the time it is reached
  CHECK(table->size() == 3);
  const auto out = sample_ok(*table, 500);
  std::set<std::int64_t> seen(out.ids.begin(), out.ids.end());
  CHECK(seen == std::set<std::int64_t>{0, 2, 4});
}

TEST_CASE("a NaN, negative or infinite priority is refused and leaves the table unchanged") {
  auto config = id_config(4);
  config.sampler = SelectorConfig{SelectorKind::prioritized, 0.6};
  auto table = make_table(config);
  const auto keys = insert_ok(*table, {1, 2}, {0.5, 2.0});
  for (double bad : {std::nan(""), -1.0, -0.0 - 1e-300, HUGE_VAL, -HUGE_VAL}) {
    INFO("priority " << bad);
    const auto before = observe(*table);
    const auto inserted = insert_ids(*table, {3, 4}, {1.0, bad});
    REQUIRE_FALSE(inserted.status.ok());
    CHECK(inserted.status.error().code == ErrorCode::invalid_argument);
    CHECK_THAT(inserted.status.error().message, Contains("priorities[1]"));
    CHECK(observe(*table) == before);

    // One bad value rejects the whole update, including the good value before it.
    const auto updated = table->update_priorities(keys, std::vector<double>{9.0, bad});
    REQUIRE_FALSE(updated.ok());
    CHECK(updated.error().code == ErrorCode::invalid_argument);
    CHECK(observe(*table) == before);
  }
  // Zero is a valid priority.
  CHECK(table->update_priorities(keys, std::vector<double>{0.0, 1.0}).ok());
}

TEST_CASE("a finite priority whose mass would overflow is refused and changes nothing") {
  for (const auto& [alpha, bad] : {std::pair{2.0, 1e160}, std::pair{1.0, 1e308}}) {
    INFO("alpha " << alpha << ", priority " << bad);
    auto config = id_config(4);
    config.sampler = SelectorConfig{SelectorKind::prioritized, alpha};
    auto table = make_table(config);
    const auto keys = insert_ok(*table, {1, 2}, {0.5, 2.0});
    const auto before = observe(*table);
    const auto inserted = insert_ids(*table, {3, 4}, {1.0, bad});
    REQUIRE_FALSE(inserted.status.ok());
    CHECK(inserted.status.error().code == ErrorCode::invalid_argument);
    CHECK_THAT(inserted.status.error().message, Contains("priorities[1]") && Contains("mass"));
    CHECK(observe(*table) == before);
    const auto updated = table->update_priorities(keys, std::vector<double>{bad, 1.0});
    REQUIRE_FALSE(updated.ok());
    CHECK(observe(*table) == before);
    CHECK(std::isfinite(table->sampling_mass().total));
  }
  // The largest accepted priorities, in every slot, still sum to a finite mass.
  auto config = id_config(4);
  config.sampler = SelectorConfig{SelectorKind::prioritized, 1.0};
  auto table = make_table(config);
  insert_ok(*table, {1, 2, 3, 4}, std::vector<double>(4, 1e300));
  CHECK(std::isfinite(table->sampling_mass().total));
  const auto drawn = sample_ok(*table, 8);
  for (double p : drawn.probabilities)
    CHECK((std::isfinite(p) && p > 0));
}

TEST_CASE("new items get the largest priority seen so far") {
  auto config = id_config(8);
  config.sampler = SelectorConfig{SelectorKind::prioritized, 0.6};
  auto table = make_table(config);
  const Storage& storage = table->storage();
  const auto first = insert_ok(*table, {1})[0];
  CHECK(storage.priority(*storage.find(first)) == 1.0);  // nothing seen yet: 1
  insert_ok(*table, {2, 3}, {0.5, 3.0});
  const auto after_insert = insert_ok(*table, {4})[0];
  CHECK(storage.priority(*storage.find(after_insert)) == 3.0);
  REQUIRE(
      table->update_priorities(std::vector<std::uint64_t>{first}, std::vector<double>{7.0}).ok());
  REQUIRE(table->update_priorities(std::vector<std::uint64_t>{first}, std::vector<double>{0.1})
              .ok());  // lowering it again does not lower the maximum seen
  const auto after_update = insert_ok(*table, {5})[0];
  CHECK(storage.priority(*storage.find(after_update)) == 7.0);
  CHECK(table->info().max_priority == 7.0);
}

TEST_CASE("an insert of more items than the capacity is refused and changes nothing") {
  auto table = make_table(id_config(3));
  insert_ok(*table, {1});
  const auto before = observe(*table);
  const auto inserted = insert_ids(*table, {2, 3, 4, 5});
  REQUIRE_FALSE(inserted.status.ok());
  CHECK(inserted.status.error().code == ErrorCode::invalid_argument);
  CHECK_THAT(inserted.status.error().message, Contains("exceeds capacity 3"));
  CHECK(observe(*table) == before);
  insert_ok(*table, {2, 3, 4});  // exactly the capacity is fine
  CHECK(stored_ids(*table) == std::set<std::int64_t>{2, 3, 4});
}

TEST_CASE("malformed insert input is refused, naming the field, and changes nothing") {
  auto table = make_table(id_config(4));
  insert_ok(*table, {1});
  const auto before = observe(*table);
  IdColumns columns({2, 3});
  std::vector<std::uint64_t> keys(2);
  auto refuse = [&](std::span<const std::span<const std::byte>> spans, std::uint64_t n,
                    std::span<const double> priorities, std::span<std::uint64_t> keys_out) {
    const Status status = table->insert(spans, n, priorities, keys_out);
    REQUIRE_FALSE(status.ok());
    CHECK(status.error().code == ErrorCode::invalid_argument);
    CHECK(observe(*table) == before);
    return status.error().message;
  };
  // The reward column holds one float too few.
  auto short_rew = columns.spans;
  short_rew[2] = short_rew[2].first(4);
  const auto message = refuse(short_rew, 2, {}, keys);
  CHECK_THAT(message, Contains("field 'rew'"));
  CHECK_THAT(message, Contains("column holds 4 bytes, 2 items need 8"));
  // A column missing altogether.
  auto two_columns = columns.spans;
  two_columns.pop_back();
  CHECK_THAT(refuse(two_columns, 2, {}, keys), Contains("2 columns, schema has 3 fields"));
  // Priorities for a different number of items, a key output of the wrong size, n = 0.
  const std::vector<double> three_priorities{1, 2, 3};
  CHECK_THAT(refuse(columns.spans, 2, three_priorities, keys), Contains("3 priorities for 2"));
  std::vector<std::uint64_t> one_key(1);
  refuse(columns.spans, 2, {}, one_key);
  CHECK_THAT(refuse({}, 0, {}, {}), Contains("0 items"));
}

TEST_CASE("an insert the rate limiter refuses would block and changes nothing") {
  auto config = id_config(8);
  config.rate_limiter = RateLimiterConfig::queue(2);
  auto table = make_table(config);
  insert_ok(*table, {1, 2});
  CHECK_FALSE(table->may_insert(1));
  const auto before = observe(*table);
  const auto inserted = insert_ids(*table, {3});
  REQUIRE_FALSE(inserted.status.ok());
  CHECK(inserted.status.error().code == ErrorCode::would_block);
  CHECK(observe(*table) == before);
  sample_ok(*table, 1);  // frees room in the queue
  CHECK(table->may_insert(1));
  insert_ok(*table, {3});
}

TEST_CASE("a sample is refused until min_size_to_sample items exist, changing nothing") {
  auto config = id_config(8);
  config.rate_limiter = RateLimiterConfig::min_size(3);
  auto table = make_table(config);
  CHECK_FALSE(table->may_sample(1));
  CHECK(sample(*table, 1).status.error().code == ErrorCode::would_block);
  insert_ok(*table, {1, 2});
  const auto before = observe(*table);
  CHECK_FALSE(table->may_sample(1));
  const auto out = sample(*table, 4);
  REQUIRE_FALSE(out.status.ok());
  CHECK(out.status.error().code == ErrorCode::would_block);
  CHECK(observe(*table) == before);  // not even the RNG moved
  insert_ok(*table, {3});
  CHECK(table->may_sample(1));
  sample_ok(*table, 4);
}

TEST_CASE("malformed sample requests are refused and change nothing") {
  auto table = make_table(id_config(4));
  insert_ok(*table, {1, 2});
  const auto before = observe(*table);
  for (double beta : {-0.5, std::nan(""), HUGE_VAL}) {
    const auto out = sample(*table, 2, beta);
    REQUIRE_FALSE(out.status.ok());
    CHECK(out.status.error().code == ErrorCode::invalid_argument);
    CHECK_THAT(out.status.error().message, Contains("beta"));
  }
  CHECK(sample(*table, 0).status.error().code == ErrorCode::invalid_argument);
  // Output buffers for 2 items but a request for 3.
  std::vector<std::uint64_t> keys(2);
  std::vector<double> probabilities(2), weights(2);
  std::vector<std::uint32_t> times(2);
  std::vector<std::int64_t> ids(3);
  std::vector<float> obs(9), rew(3);
  std::vector<std::span<std::byte>> columns{std::as_writable_bytes(std::span(ids)),
                                            std::as_writable_bytes(std::span(obs)),
                                            std::as_writable_bytes(std::span(rew))};
  CHECK(table->sample(3, 0.0, SampleBuffers{keys, probabilities, weights, times, columns})
            .error()
            .code == ErrorCode::invalid_argument);
  CHECK(observe(*table) == before);
}

TEST_CASE("a sample copies exactly the inserted bytes of multi-dimensional fields of many dtypes") {
  // "stack" and "odd" are large enough to be stored with streaming stores (stream_cell);
  // "odd" (4,103 bytes) also puts its rows at every alignment.
  auto schema = Schema::create(
      {Field{"pixels", DType::uint8, {2, 3, 5}}, Field{"pos", DType::float64, {3}},
       Field{"idx", DType::int16, {2, 2}}, Field{"flag", DType::boolean, {}},
       Field{"half", DType::float16, {3}}, Field{"big", DType::uint64, {2, 1}},
       Field{"stack", DType::uint8, {4, 84, 84}}, Field{"odd", DType::uint8, {4103}}});
  REQUIRE(schema.ok());
  TableConfig config;
  config.name = "bytes";
  config.schema = schema.value();
  config.capacity = 16;
  config.seed = 9;
  auto table = make_table(config);
  const std::size_t fields = schema->size();

  Rng rng(123);
  std::map<std::uint64_t, std::vector<std::vector<std::byte>>> expected;  // key -> per field
  for (std::uint64_t n : {7u, 6u, 7u}) {  // 20 items into 16 slots: 4 evicted
    std::vector<std::vector<std::byte>> columns(fields);
    for (std::size_t f = 0; f < fields; ++f) {
      columns[f].resize(n * schema->field(f).item_bytes());
      for (auto& byte : columns[f])
        byte = static_cast<std::byte>(rng.next());
    }
    std::vector<std::span<const std::byte>> spans(columns.begin(), columns.end());
    std::vector<std::uint64_t> keys(n);
    REQUIRE(table->insert(spans, n, {}, keys).ok());
    for (std::uint64_t i = 0; i < n; ++i) {
      auto& item = expected[keys[i]];
      for (std::size_t f = 0; f < fields; ++f) {
        const std::uint64_t bytes = schema->field(f).item_bytes();
        item.emplace_back(columns[f].begin() + i * bytes, columns[f].begin() + (i + 1) * bytes);
      }
    }
  }
  REQUIRE(table->size() == 16);

  const std::uint64_t n = 64;
  std::vector<std::vector<std::byte>> out(fields);
  std::vector<std::span<std::byte>> out_spans;
  for (std::size_t f = 0; f < fields; ++f) {
    out[f].resize(n * schema->field(f).item_bytes());
    out_spans.emplace_back(out[f]);
  }
  std::vector<std::uint64_t> keys(n);
  std::vector<double> probabilities(n), weights(n);
  std::vector<std::uint32_t> times(n);
  std::set<std::uint64_t> seen;
  for (int round = 0; round < 5; ++round) {
    REQUIRE(
        table->sample(n, 0.0, SampleBuffers{keys, probabilities, weights, times, out_spans}).ok());
    for (std::uint64_t i = 0; i < n; ++i) {
      INFO("round " << round << " row " << i);
      REQUIRE(table->storage().find(keys[i]).has_value());
      const auto& item = expected.at(keys[i]);
      for (std::size_t f = 0; f < fields; ++f) {
        const std::uint64_t bytes = schema->field(f).item_bytes();
        INFO("field " << schema->field(f).name);
        REQUIRE(std::memcmp(out[f].data() + i * bytes, item[f].data(), bytes) == 0);
      }
      seen.insert(keys[i]);
    }
  }
  CHECK(seen.size() == 16);  // 320 uniform draws reach every stored item
}

TEST_CASE("a field sampled in place points at the stored bytes of each drawn item") {
  auto table = make_table(id_config(8));
  IdColumns items({10, 11, 12, 13, 14});
  std::vector<std::uint64_t> inserted(5);
  REQUIRE(table->insert(items.spans, 5, {}, inserted).ok());

  const std::uint64_t n = 32;
  std::vector<std::uint64_t> keys(n);
  std::vector<double> probabilities(n), weights(n);
  std::vector<std::uint32_t> times(n);
  std::vector<std::byte> id_column(n * sizeof(std::int64_t)), rew_column(n * sizeof(float));
  std::vector<const std::byte*> obs_rows(n, nullptr);
  // obs (field 1) is viewed in place; id and rew are copied.
  const std::vector<std::span<std::byte>> columns{id_column, {}, rew_column};
  const std::vector<std::span<const std::byte*>> rows{{}, obs_rows, {}};
  REQUIRE(table->sample(n, 0.0, SampleBuffers{keys, probabilities, weights, times, columns, rows})
              .ok());
  for (std::uint64_t i = 0; i < n; ++i) {
    std::int64_t id = 0;
    std::memcpy(&id, id_column.data() + i * sizeof id, sizeof id);
    float obs[3];
    std::memcpy(obs, obs_rows[i], sizeof obs);
    INFO("row " << i << " id " << id);
    CHECK(obs[0] == static_cast<float>(id));
    CHECK(obs[2] == static_cast<float>(id) + 0.5f);
    CHECK(obs_rows[i] == table->storage().cell(1, *table->storage().find(keys[i])));
  }
  // A field neither copied nor viewed (no row pointers for it) is refused.
  const std::vector<std::span<const std::byte*>> too_few{{}, {}, {}};
  CHECK_FALSE(
      table->sample(n, 0.0, SampleBuffers{keys, probabilities, weights, times, columns, too_few})
          .ok());
}

TEST_CASE("a prioritized table reports each item's probability and importance weight") {
  auto config = id_config(4);
  config.sampler = SelectorConfig{SelectorKind::prioritized, 1.0};
  auto table = make_table(config);
  insert_ok(*table, {0, 1, 2, 3}, {1.0, 2.0, 0.0, 5.0});
  const double total = 8.0;
  const std::vector<double> priority_of_id{1.0, 2.0, 0.0, 5.0};
  const auto out = sample_ok(*table, 1000, 0.5);
  for (std::size_t i = 0; i < out.ids.size(); ++i) {
    const double p = priority_of_id[static_cast<std::size_t>(out.ids[i])];
    REQUIRE(p > 0);
    REQUIRE(out.probabilities[i] == Approx(p / total));
    REQUIRE(out.weights[i] == Approx(std::pow(p / 1.0, -0.5)));  // relative to the rarest
  }
}

TEST_CASE("tables with the same seed sample the same keys, and another seed samples others") {
  auto run = [](std::uint64_t seed) {
    auto config = id_config(100);
    config.seed = seed;
    auto table = make_table(config);
    std::vector<std::int64_t> ids(100);
    for (std::int64_t i = 0; i < 100; ++i)
      ids[static_cast<std::size_t>(i)] = i;
    insert_ok(*table, ids);
    return sample_ok(*table, 50).ids;
  };
  CHECK(run(5) == run(5));
  CHECK(run(5) != run(6));
}

TEST_CASE("reset empties the table, resets the rate limiter, and keys stay unique") {
  auto config = id_config(8);
  config.rate_limiter = RateLimiterConfig::min_size(2);
  auto table = make_table(config);
  const auto old_keys = insert_ok(*table, {1, 2, 3, 4, 5});
  sample_ok(*table, 3);
  table->reset();
  CHECK(table->size() == 0);
  CHECK(table->info().size == 0);
  CHECK(table->info().rate_limiter == RateLimiterCounters{});
  CHECK(table->info().counters.inserts == 5);  // table counters are kept
  CHECK(table->info().counters.samples == 3);
  CHECK_FALSE(table->may_sample(1));
  CHECK(stored_ids(*table).empty());

  const auto stale = table->update_priorities(old_keys, std::vector<double>(5, 1.0));
  REQUIRE(stale.ok());
  CHECK(stale->stale == 5);
  const auto new_keys = insert_ok(*table, {6, 7, 8, 9, 10});
  for (auto key : new_keys) {
    CHECK(std::find(old_keys.begin(), old_keys.end(), key) == old_keys.end());
  }
  for (auto key : old_keys)
    CHECK_FALSE(table->storage().find(key).has_value());
  const auto out = sample_ok(*table, 100);
  for (auto id : out.ids)
    CHECK(id >= 6);
}

TEST_CASE("info counts inserts, samples, updates, deletes, evictions and expirations") {
  auto config = id_config(3);
  config.max_times_sampled = 2;
  auto table = make_table(config);
  auto keys = insert_ok(*table, {1, 2, 3});
  keys.push_back(insert_ok(*table, {4})[0]);  // item 1 evicted
  const auto updated = table->update_priorities(std::vector<std::uint64_t>{keys[1], keys[0]},
                                                std::vector<double>{0.5, 0.5});
  REQUIRE(updated.ok());
  CHECK(updated->applied == 1);
  CHECK(updated->stale == 1);
  const auto deleted = table->delete_keys(std::vector<std::uint64_t>{keys[2], keys[0]});
  CHECK(deleted.deleted == 1);
  CHECK(deleted.stale == 1);
  sample_ok(*table, 4);  // two items, two draws each: both expire

  const TableInfo info = table->info();
  CHECK(info.size == 0);
  CHECK(info.capacity == 3);
  TableCounters expected;
  expected.inserts = 4;
  expected.samples = 4;
  expected.priority_updates = 1;
  expected.stale_updates = 1;
  expected.deletes = 1;
  expected.stale_deletes = 1;
  expected.evictions = 1;
  expected.expirations = 2;
  CHECK(info.counters == expected);
  // The limiter counts every removal as a delete: 1 eviction + 1 delete + 2 expirations.
  CHECK(info.rate_limiter == RateLimiterCounters{4, 4, 4});
  CHECK(info.max_priority == 1.0);
}

TEST_CASE("invalid table configurations are refused, naming the key at fault") {
  auto refused = [](const TableConfig& config) {
    auto table = Table::create(config);
    REQUIRE_FALSE(table.ok());
    return table.error();
  };
  auto bad_name = id_config(4);
  bad_name.name = "my table";
  CHECK_THAT(refused(bad_name).message, Contains("name"));
  auto no_capacity = id_config(4);
  no_capacity.capacity = 0;
  CHECK_THAT(refused(no_capacity).message, Contains("capacity"));
  auto min_size = id_config(4);
  min_size.rate_limiter = RateLimiterConfig::min_size(5);
  CHECK_THAT(refused(min_size).message, Contains("min_size_to_sample (5) exceeds capacity (4)"));
  auto sampler = id_config(4);
  sampler.sampler = SelectorConfig{SelectorKind::prioritized, -1.0};
  const auto sampler_error = refused(sampler);
  CHECK_THAT(sampler_error.message, Contains("table 'replay': sampler"));
  CHECK_THAT(sampler_error.message, Contains("priority_exponent"));
  auto limiter = id_config(4);
  limiter.rate_limiter = RateLimiterConfig::queue(0);
  CHECK_THAT(refused(limiter).message, Contains("table 'replay': rate limiter"));
  // 1000 items: the column block (stamps 8000, id 8000, obs 12000 and rew 4000 bytes, each
  // rounded up to a page: 32768) + 41 metadata bytes + 8 (uniform) + 8 (fifo) + 16 replay
  // stats + 8 (the version-bounded sampler, uniform) per slot.
  auto too_big = Table::create(id_config(1000), 113767);
  REQUIRE_FALSE(too_big.ok());
  CHECK(too_big.error().code == ErrorCode::resource_exhausted);
  CHECK_THAT(too_big.error().message,
             Contains("needs 113768 bytes") && Contains("slot metadata 41000") &&
                 Contains("replay stats 16000") && Contains("version-bounded sampler 8000") &&
                 Contains("max_table_bytes = 113767"));
  CHECK(Table::create(id_config(1000), 113768).ok());
}

TEST_CASE("max_table_bytes counts everything a table allocates, not only its data") {
  // One bool field: metadata and selectors dominate (the data is 1 byte per slot).
  auto schema = Schema::create({Field{"done", DType::boolean, {}}});
  REQUIRE(schema.ok());
  const auto kinds = {SelectorKind::uniform, SelectorKind::prioritized, SelectorKind::fifo,
                      SelectorKind::lifo,    SelectorKind::max_heap,    SelectorKind::min_heap};
  for (auto sampler : kinds) {
    for (auto remover : kinds) {
      for (std::uint32_t capacity : {1u, 5u, 1000u, 1024u, 1025u}) {
        INFO(selector_kind_name(sampler)
             << " / " << selector_kind_name(remover) << ", capacity " << capacity);
        TableConfig config;
        config.name = std::string(1, 't');  // not a literal: g++ 12 -Wrestrict false positive
        config.schema = schema.value();
        config.capacity = capacity;
        config.sampler = SelectorConfig{sampler, 0.6};
        config.remover = remover;
        const auto counted = table_bytes(config).total();
        auto table = make_table(config);
        // Fill the table and churn it, so every structure reaches its largest size.
        std::vector<std::uint8_t> done(capacity, 1);
        std::vector<std::span<const std::byte>> columns{std::as_bytes(std::span(done))};
        std::vector<std::uint64_t> keys(capacity);
        for (int round = 0; round < 2; ++round)
          REQUIRE(table->insert(columns, capacity, {}, keys).ok());
        table->delete_keys(std::span(keys).first(capacity / 2));
        CHECK(table->allocated_bytes() <= counted);
        CHECK(table->allocated_bytes() * 2 >= counted);  // the count is not wildly high
        CHECK(Table::create(config, static_cast<std::uint64_t>(counted)).ok());
        CHECK_FALSE(Table::create(config, static_cast<std::uint64_t>(counted) - 1).ok());
      }
    }
  }
}

TEST_CASE("a sample records at most kObservedDrawsPerRequest of its draws, all of a small one") {
  auto table = make_table(id_config(512));
  std::vector<std::int64_t> ids(512);
  for (std::size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<std::int64_t>(i);
  insert_ok(*table, ids);
  sample_ok(*table, 16);
  CHECK(table->info().replay.sample_age_inserts.count == 16);
  sample_ok(*table, 256);  // every 16th draw
  CHECK(table->info().replay.sample_age_inserts.count == 16 + 16);
  sample_ok(*table, 100);  // every 7th draw: 0, 7, ..., 98
  CHECK(table->info().replay.sample_age_inserts.count == 16 + 16 + 15);
  CHECK(table->info().counters.samples == 16 + 256 + 100);
}

}  // namespace
}  // namespace replayd
