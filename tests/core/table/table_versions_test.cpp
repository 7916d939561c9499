// Tests for policy versions in core/table (Table::insert versions, sample min_version,
// drop_versions_below, VersionIndex, the staleness histogram, snapshots): every bounded
// draw is checked against a reference model that keeps the stored items in a plain map
// and computes each selector's choice over the eligible ones directly.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "core/snapshot/table_snapshot.h"
#include "core/table/table.h"
#include "tests/core/chi_square.h"

namespace replayd {
namespace {

Schema id_schema() {
  auto schema = Schema::create({Field{"id", DType::int64, {}}});
  REQUIRE(schema.ok());
  return schema.value();
}

TableConfig config_of(SelectorKind sampler, std::uint32_t capacity, double alpha = 0.6) {
  TableConfig config;
  config.name = "versions";
  config.schema = id_schema();
  config.capacity = capacity;
  config.sampler = SelectorConfig{sampler, alpha};
  config.remover = SelectorKind::fifo;
  config.rate_limiter = RateLimiterConfig::min_size(1);
  config.seed = 7;
  return config;
}

std::unique_ptr<Table> make_table(const TableConfig& config) {
  auto table = Table::create(config);
  INFO((table.ok() ? std::string() : table.error().message));
  REQUIRE(table.ok());
  return std::move(table).value();
}

// The reference: what the table stores, by id (ids increase with insertion order).
struct Model {
  struct Item {
    std::uint64_t version;
    double priority;
  };
  std::map<std::int64_t, Item> items;
  std::uint32_t capacity;

  void insert(std::int64_t id, std::uint64_t version, double priority) {
    if (items.size() == capacity) items.erase(items.begin());  // fifo remover
    items[id] = Item{version, priority};
  }
  std::vector<std::int64_t> eligible(std::uint64_t bound) const {
    std::vector<std::int64_t> ids;
    for (const auto& [id, item] : items)
      if (item.version >= bound) ids.push_back(id);
    return ids;
  }
};

// Inserts one item per id with its version and priority, into table and model.
void insert(Table& table, Model& model, std::vector<std::int64_t> ids,
            std::vector<std::uint64_t> versions, std::vector<double> priorities) {
  std::vector<std::span<const std::byte>> columns{std::as_bytes(std::span(ids))};
  std::vector<std::uint64_t> keys(ids.size());
  const Status status = table.insert(columns, ids.size(), priorities, keys, versions);
  INFO((status.ok() ? std::string() : status.error().message));
  REQUIRE(status.ok());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::uint64_t version = versions.size() == 1 ? versions[0] : versions[i];
    model.insert(ids[i], version, priorities[i]);
  }
}

struct Draws {
  Status status = Ok{};
  std::vector<std::int64_t> ids;
  std::vector<double> probabilities;
  std::vector<double> weights;
  std::vector<std::uint64_t> versions;
  std::vector<std::uint64_t> keys;
};

Draws draw(Table& table, std::uint64_t n, std::uint64_t min_version, double beta = 0.0) {
  Draws out;
  out.ids.resize(n);
  out.probabilities.resize(n);
  out.weights.resize(n);
  out.versions.resize(n);
  out.keys.resize(n);
  std::vector<std::uint32_t> times(n);
  std::vector<std::span<std::byte>> columns{std::as_writable_bytes(std::span(out.ids))};
  out.status = table.sample(
      n, beta,
      SampleBuffers{out.keys, out.probabilities, out.weights, times, columns, {}, out.versions},
      min_version);
  return out;
}

Draws draw_ok(Table& table, std::uint64_t n, std::uint64_t min_version, double beta = 0.0) {
  Draws out = draw(table, n, min_version, beta);
  INFO((out.status.ok() ? std::string() : out.status.error().message));
  REQUIRE(out.status.ok());
  return out;
}

TEST_CASE("items keep the version they were inserted with: one per item, one for all, none") {
  auto table = make_table(config_of(SelectorKind::fifo, 8));
  Model model{{}, 8};
  insert(*table, model, {0, 1, 2}, {5, 6, 7}, {1, 1, 1});
  insert(*table, model, {3, 4}, {9}, {1, 1});
  std::vector<std::int64_t> ids{5};
  std::vector<std::span<const std::byte>> columns{std::as_bytes(std::span(ids))};
  std::vector<std::uint64_t> keys(1);
  REQUIRE(table->insert(columns, 1, {}, keys).ok());  // no version: 0
  const Draws all = draw_ok(*table, 6, 0);
  CHECK(all.ids == std::vector<std::int64_t>{0, 0, 0, 0, 0, 0});  // fifo: the oldest each time
  CHECK(all.versions == std::vector<std::uint64_t>(6, 5));
  CHECK(table->versions().min_version() == 0u);
  CHECK(table->versions().max_version() == 9u);
  CHECK(table->versions().distinct_versions() == 5);
  CHECK(table->versions().count_at_least(6) == 4);

  // Two versions for three items is refused, and nothing is stored.
  std::vector<std::int64_t> three{10, 11, 12};
  std::vector<std::span<const std::byte>> three_columns{std::as_bytes(std::span(three))};
  std::vector<std::uint64_t> three_keys(3);
  const std::vector<std::uint64_t> two{1, 2};
  const Status refused = table->insert(three_columns, 3, {}, three_keys, two);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Catch::Matchers::Contains("2 versions for 3 items"));
  CHECK(table->size() == 6);
}

// The deterministic selectors choose over the eligible items only, and the eligible sampler
// follows every insert, eviction (past the ring's wrap), delete and priority update.
TEST_CASE("fifo, lifo and heap samplers bounded by version choose exactly the reference's item") {
  for (SelectorKind kind :
       {SelectorKind::fifo, SelectorKind::lifo, SelectorKind::max_heap, SelectorKind::min_heap}) {
    INFO("sampler " << selector_kind_name(kind));
    auto table = make_table(config_of(kind, 16));
    Model model{{}, 16};
    Rng rng(11);
    std::int64_t next_id = 0;
    for (int step = 0; step < 400; ++step) {
      const std::uint64_t version = static_cast<std::uint64_t>(step / 10) + rng.uniform_below(3);
      const double priority = 0.5 + static_cast<double>(rng.uniform_below(1000));
      insert(*table, model, {next_id++}, {version}, {priority});
      if (step % 7 == 3) {  // a priority update of a random stored item
        const Draws any = draw_ok(*table, 1, 0);
        const double updated = 0.5 + static_cast<double>(rng.uniform_below(1000));
        const std::vector<std::uint64_t> key{any.keys[0]};
        const std::vector<double> priority_update{updated};
        REQUIRE(table->update_priorities(key, priority_update).ok());
        model.items[any.ids[0]].priority = updated;
      }
      if (step % 11 == 5) {  // a delete
        const Draws any = draw_ok(*table, 1, 0);
        table->delete_keys(std::vector<std::uint64_t>{any.keys[0]});
        model.items.erase(any.ids[0]);
      }
      for (std::uint64_t bound : {std::uint64_t{0}, static_cast<std::uint64_t>(step / 10),
                                  static_cast<std::uint64_t>(step / 10 + 2)}) {
        const auto eligible = model.eligible(bound);
        REQUIRE(table->versions().count_at_least(bound) == eligible.size());
        if (eligible.empty()) {
          CHECK(draw(*table, 1, bound).status.error().code == ErrorCode::would_block);
          CHECK_FALSE(table->may_sample(1, bound));
          continue;
        }
        std::int64_t expected = 0;
        if (kind == SelectorKind::fifo) expected = eligible.front();
        if (kind == SelectorKind::lifo) expected = eligible.back();
        if (kind == SelectorKind::max_heap || kind == SelectorKind::min_heap) {
          const bool max = kind == SelectorKind::max_heap;
          double best = max ? -1.0 : INFINITY;
          for (auto id : eligible) {
            const double p = model.items[id].priority;
            if (max ? p > best : p < best) {
              best = p;
              expected = id;
            }
          }
          // Ties between equal priorities may go either way: compare priorities there.
          const Draws got = draw_ok(*table, 1, bound);
          CHECK(model.items[got.ids[0]].priority == best);
          CHECK(got.versions[0] >= bound);
          continue;
        }
        const Draws got = draw_ok(*table, 1, bound);
        CHECK(got.ids[0] == expected);
        CHECK(got.versions[0] == model.items[expected].version);
      }
    }
  }
}

TEST_CASE("a uniform sample bounded by version draws every eligible item equally, no other") {
  auto table = make_table(config_of(SelectorKind::uniform, 100));
  Model model{{}, 100};
  std::vector<std::int64_t> ids;
  std::vector<std::uint64_t> versions;
  for (int i = 0; i < 100; ++i) {
    ids.push_back(i);
    versions.push_back(static_cast<std::uint64_t>(i % 10));  // versions interleaved in slots
  }
  insert(*table, model, ids, versions, std::vector<double>(100, 1.0));
  const std::uint64_t bound = 7;
  const auto eligible = model.eligible(bound);
  REQUIRE(eligible.size() == 30);
  std::map<std::int64_t, std::uint64_t> counts;
  for (int round = 0; round < 100; ++round) {
    const Draws got = draw_ok(*table, 1000, bound);
    for (std::size_t i = 0; i < got.ids.size(); ++i) {
      REQUIRE(got.versions[i] >= bound);
      REQUIRE(model.items.at(got.ids[i]).version == got.versions[i]);
      REQUIRE(got.probabilities[i] == Approx(1.0 / 30).epsilon(1e-12));
      REQUIRE(got.weights[i] == 1.0);
      ++counts[got.ids[i]];
    }
  }
  std::vector<std::uint64_t> observed;
  for (auto id : eligible)
    observed.push_back(counts[id]);
  CHECK(counts.size() == eligible.size());
  const auto result = testing::chi_square(observed, std::vector<double>(30, 1.0 / 30));
  INFO("chi-square " << result.statistic << " critical " << result.critical);
  CHECK(result.passes());
}

TEST_CASE("a prioritized sample bounded by version: probabilities and weights over the eligible") {
  const double alpha = 0.6;
  const double beta = 0.4;
  auto table = make_table(config_of(SelectorKind::prioritized, 64, alpha));
  Model model{{}, 64};
  std::vector<std::int64_t> ids;
  std::vector<std::uint64_t> versions;
  std::vector<double> priorities;
  for (int i = 0; i < 64; ++i) {
    ids.push_back(i);
    versions.push_back(static_cast<std::uint64_t>((i * 7) % 8));
    // The smallest priorities lie below the bound: the weights' maximum must ignore them.
    priorities.push_back(versions.back() < 4 ? 0.01 : 1.0 + (i % 5));
  }
  insert(*table, model, ids, versions, priorities);
  const std::uint64_t bound = 4;
  const auto eligible = model.eligible(bound);
  double total = 0;
  double min_mass = INFINITY;
  for (auto id : eligible) {
    const double mass = std::pow(model.items[id].priority, alpha);
    total += mass;
    min_mass = std::min(min_mass, mass);
  }
  std::map<std::int64_t, std::uint64_t> counts;
  for (int round = 0; round < 100; ++round) {
    const Draws got = draw_ok(*table, 1000, bound, beta);
    for (std::size_t i = 0; i < got.ids.size(); ++i) {
      const double mass = std::pow(model.items.at(got.ids[i]).priority, alpha);
      REQUIRE(got.versions[i] >= bound);
      REQUIRE(got.probabilities[i] == Approx(mass / total).epsilon(1e-9));
      REQUIRE(got.weights[i] == Approx(std::pow(mass / min_mass, -beta)).epsilon(1e-9));
      ++counts[got.ids[i]];
    }
  }
  std::vector<std::uint64_t> observed;
  std::vector<double> expected;
  for (auto id : eligible) {
    observed.push_back(counts[id]);
    expected.push_back(std::pow(model.items[id].priority, alpha) / total);
  }
  const auto result = testing::chi_square(observed, expected);
  INFO("chi-square " << result.statistic << " critical " << result.critical);
  CHECK(result.passes());

  // Changing the exponent rebuilds the eligible sampler with it.
  REQUIRE(table->set_priority_exponent(1.0).ok());
  double linear_total = 0;
  for (auto id : eligible)
    linear_total += model.items[id].priority;
  const Draws after = draw_ok(*table, 100, bound);
  for (std::size_t i = 0; i < after.ids.size(); ++i) {
    CHECK(after.probabilities[i] ==
          Approx(model.items.at(after.ids[i]).priority / linear_total).epsilon(1e-9));
  }
}

TEST_CASE(
    "a bounded sample waits for min_size_to_sample eligible items, and refuses "
    "max_times_sampled") {
  TableConfig config = config_of(SelectorKind::uniform, 32);
  config.rate_limiter = RateLimiterConfig::min_size(3);
  auto table = make_table(config);
  Model model{{}, 32};
  insert(*table, model, {0, 1, 2, 3}, {1, 1, 2, 2}, {1, 1, 1, 1});
  CHECK(table->may_sample(1, 1));
  CHECK_FALSE(table->may_sample(1, 2));  // 2 eligible, 3 needed
  CHECK(draw(*table, 1, 2).status.error().code == ErrorCode::would_block);
  insert(*table, model, {4}, {3}, {1});
  CHECK(table->may_sample(1, 2));
  for (auto version : draw_ok(*table, 10, 2).versions)
    CHECK(version >= 2);

  TableConfig retiring = config_of(SelectorKind::uniform, 32);
  retiring.max_times_sampled = 2;
  auto limited = make_table(retiring);
  Model limited_model{{}, 32};
  insert(*limited, limited_model, {0}, {1}, {1});
  const Draws refused = draw(*limited, 1, 1);
  REQUIRE_FALSE(refused.status.ok());
  CHECK(refused.status.error().code == ErrorCode::failed_precondition);
  CHECK_THAT(refused.status.error().message, Catch::Matchers::Contains("max_times_sampled"));
  CHECK(draw(*limited, 1, 0).status.ok());  // unbounded samples still work
}

TEST_CASE("dropping the versions below a bound removes exactly those items, counted") {
  auto table = make_table(config_of(SelectorKind::prioritized, 64));
  Model model{{}, 64};
  std::vector<std::int64_t> ids;
  std::vector<std::uint64_t> versions;
  for (int i = 0; i < 50; ++i) {
    ids.push_back(i);
    versions.push_back(static_cast<std::uint64_t>(i % 6));
  }
  insert(*table, model, ids, versions, std::vector<double>(50, 2.0));
  (void)draw_ok(*table, 5, 3);  // the eligible sampler exists and must follow the drops
  const auto kept = model.eligible(3);
  CHECK(table->drop_versions_below(3) == 50 - kept.size());
  CHECK(table->size() == kept.size());
  CHECK(table->info().counters.version_drops == 50 - kept.size());
  CHECK(table->rate_limiter().counters().deletes == 50 - kept.size());
  CHECK(table->versions().min_version() == 3u);
  CHECK(table->drop_versions_below(3) == 0);  // nothing below: nothing scanned or dropped
  const Draws got = draw_ok(*table, 500, 0);
  for (std::size_t i = 0; i < got.ids.size(); ++i) {
    CHECK(got.versions[i] >= 3);
    CHECK(got.probabilities[i] == Approx(1.0 / static_cast<double>(kept.size())));
  }
}

TEST_CASE("draws of a table that knows its policy version record their staleness") {
  auto table = make_table(config_of(SelectorKind::fifo, 8));
  Model model{{}, 8};
  insert(*table, model, {0, 1}, {3, 9}, {1, 1});
  (void)draw_ok(*table, 1, 0);  // no policy version yet: not recorded
  CHECK(table->info().replay.sample_staleness_versions.count == 0);
  table->set_policy_version(10);
  (void)draw_ok(*table, 1, 0);  // item 0, version 3: 7 behind
  (void)draw_ok(*table, 1, 9);  // item 1, version 9: 1 behind
  const auto& staleness = table->info().replay.sample_staleness_versions;
  CHECK(staleness.count == 2);
  CHECK(staleness.sum == 8);
}

TEST_CASE("a snapshot keeps every item's version, the followed value and the drops") {
  TableConfig config = config_of(SelectorKind::uniform, 16);
  config.versions = VersionsConfig{"policy", 2};
  auto table = make_table(config);
  Model model{{}, 16};
  for (int batch = 0; batch < 2; ++batch) {  // 20 items: past the ring's wrap
    std::vector<std::int64_t> ids;
    std::vector<std::uint64_t> versions;
    for (int i = 10 * batch; i < 10 * batch + 10; ++i) {
      ids.push_back(i);
      versions.push_back(static_cast<std::uint64_t>(i / 3));
    }
    insert(*table, model, ids, versions, std::vector<double>(10, 1.0));
  }
  REQUIRE(table->drop_versions_below(2) > 0);
  MemorySink sink;
  REQUIRE(write_snapshot(std::vector<const Table*>{table.get()}, 1700000000000, sink).ok());
  MemorySource source(sink.data());
  auto decoded = read_snapshot(source, SnapshotLimits{});
  INFO((decoded.ok() ? std::string() : decoded.error().message));
  REQUIRE(decoded.ok());
  Table& restored = *decoded->tables.at(0);
  CHECK(restored.config().versions == config.versions);
  CHECK(restored.info().counters.version_drops == table->info().counters.version_drops);
  CHECK(restored.versions().count_at_least(4) == table->versions().count_at_least(4));
  CHECK(restored.versions().min_version() == table->versions().min_version());
  for (std::uint32_t slot = 0; slot < 16; ++slot) {
    REQUIRE(restored.storage().occupied(slot) == table->storage().occupied(slot));
    if (table->storage().occupied(slot))
      CHECK(restored.storage().version(slot) == table->storage().version(slot));
  }
  // Both draw the same bounded sequence (same RNG state, same eligible order).
  CHECK(draw_ok(restored, 50, 4).ids == draw_ok(*table, 50, 4).ids);
}

TEST_CASE("versions.drop_behind needs a followed value, and the value a valid name") {
  TableConfig config = config_of(SelectorKind::uniform, 4);
  config.versions.drop_behind = 3;
  auto refused = Table::create(config);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Catch::Matchers::Contains("needs versions.value"));
  config.versions.value = "bad name!";
  refused = Table::create(config);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Catch::Matchers::Contains("versions.value"));
  config.versions.value = "learner/policy";
  CHECK(Table::create(config).ok());
}

}  // namespace
}  // namespace replayd
