// Tests for a table's file tier in core (TierIndex, Table::choose_spill / finish_spill, cold
// draws): which rows go cold and in what order, that a cold row's cells are given back and
// never read by sample(), that draws over both tiers are exactly the selector's (against a
// reference model), and that removals keep the per-segment live counts.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>
#include <vector>

#include "core/snapshot/snapshot_io.h"
#include "core/snapshot/table_snapshot.h"
#include "core/table/table.h"
#include "core/tier/tier_index.h"
#include "tests/core/chi_square.h"

namespace replayd {
namespace {

// Rows of 2 pages and a bit, so that runs of cold rows give back whole pages.
constexpr std::uint64_t kValues = 2100;  // float32: 8,400 bytes

TableConfig tier_config(std::uint32_t capacity, std::uint64_t ram_rows,
                        SelectorKind sampler = SelectorKind::uniform) {
  auto schema =
      Schema::create({Field{"id", DType::int64, {}}, Field{"obs", DType::float32, {kValues}}});
  REQUIRE(schema.ok());
  TableConfig config;
  config.name = "tiered";
  config.schema = schema.value();
  config.capacity = capacity;
  config.sampler = SelectorConfig{sampler, 1.0};
  config.remover = SelectorKind::fifo;
  config.rate_limiter = RateLimiterConfig::min_size(1);
  config.seed = 11;
  config.file_tier.ram_bytes = ram_rows * fixed_row_bytes(config.schema);
  return config;
}

std::unique_ptr<Table> make_table(const TableConfig& config) {
  auto table = Table::create(config);
  INFO((table.ok() ? std::string() : table.error().message));
  REQUIRE(table.ok());
  return std::move(table).value();
}

// Inserts items id .. id + n - 1, each obs filled with its id, priority id + 1.
std::vector<std::uint64_t> insert_ids(Table& table, std::int64_t first, std::uint64_t n) {
  std::vector<std::int64_t> ids(n);
  std::vector<float> obs(n * kValues);
  std::vector<double> priorities(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    ids[i] = first + static_cast<std::int64_t>(i);
    std::fill_n(obs.begin() + i * kValues, kValues, static_cast<float>(ids[i]));
    priorities[i] = static_cast<double>(ids[i] + 1);
  }
  const std::vector<std::span<const std::byte>> columns{std::as_bytes(std::span(ids)),
                                                        std::as_bytes(std::span(obs))};
  std::vector<std::uint64_t> keys(n);
  REQUIRE(table.insert(columns, n, priorities, keys).ok());
  return keys;
}

// Writes out every row past the budget as the service would: record locations that name
// the row's id (segment = id / 10, offset = id) so that a cold draw tells which row it is.
std::vector<SpillRow> spill_all(Table& table) {
  std::vector<SpillRow> all;
  for (;;) {
    std::vector<SpillRow> rows = table.choose_spill(64);
    if (rows.empty()) return all;
    std::vector<ColdLocation> where;
    for (const SpillRow& row : rows) {
      std::int64_t id;
      std::memcpy(&id, table.storage().cell(0, row.slot), sizeof id);
      where.push_back(ColdLocation{.segment = static_cast<std::uint32_t>(id / 10),
                                   .bytes = 100,
                                   .offset = static_cast<std::uint64_t>(id)});
    }
    table.finish_spill(rows, where);
    all.insert(all.end(), rows.begin(), rows.end());
  }
}

// The buffers of one sample of n draws, cold ones listed (Table::sample's SampleBuffers).
struct Draws {
  explicit Draws(std::uint64_t n)
      : keys(n), probabilities(n), weights(n), times(n), ids(n, -1), obs(n * kValues) {}
  std::vector<std::uint64_t> keys;
  std::vector<double> probabilities, weights;
  std::vector<std::uint32_t> times;
  std::vector<std::int64_t> ids;
  std::vector<float> obs;
  std::vector<std::span<std::byte>> columns{std::as_writable_bytes(std::span(ids)),
                                            std::as_writable_bytes(std::span(obs))};
  std::vector<ColdDraw> cold;
  auto parts() { return std::tie(keys, ids, obs, cold); }
  SampleBuffers buffers() {
    SampleBuffers out{keys, probabilities, weights, times, columns};
    out.cold = &cold;
    return out;
  }
};

TEST_CASE("rows past the RAM budget go cold oldest first, and the budget stays hot") {
  auto table = make_table(tier_config(100, 10));
  insert_ids(*table, 0, 40);
  REQUIRE(table->tier()->hot_rows() == 40);
  const auto spilled = spill_all(*table);
  REQUIRE(spilled.size() == 30);
  REQUIRE(table->tier()->hot_rows() == 10);
  REQUIRE(table->tier()->cold_rows() == 30);
  // The 30 oldest (ids 0-29) are cold: their segments are ids / 10.
  REQUIRE(table->tier()->live_rows(0) == 10);
  REQUIRE(table->tier()->live_rows(2) == 10);
  REQUIRE(table->tier()->live_rows(3) == 0);
}

TEST_CASE("a cold row's cells are given back: whole pages of its obs read zeros") {
  auto table = make_table(tier_config(100, 10));
  insert_ids(*table, 1, 40);  // ids 1..40: no row of zeros
  spill_all(*table);
  // Row 1..29 (slots 0..28 plus) are cold and adjacent: the pages strictly inside their obs
  // cells are zeros now; the hot rows' cells are intact.
  std::size_t zero_cold = 0;
  for (std::uint32_t slot = 0; slot < 40; ++slot) {
    const auto* obs = reinterpret_cast<const float*>(table->storage().cell(1, slot));
    if (table->tier()->cold(slot)) {
      if (obs[kValues / 2] == 0.0f) ++zero_cold;
    } else {
      REQUIRE(obs[0] != 0.0f);
      REQUIRE(obs[kValues - 1] != 0.0f);
    }
  }
  REQUIRE(zero_cold == 30);
}

TEST_CASE("sample leaves cold draws to the caller with their locations, and copies hot rows") {
  auto table = make_table(tier_config(100, 10));
  insert_ids(*table, 0, 40);
  spill_all(*table);
  const std::uint64_t n = 2000;
  Draws draws(n);
  auto [keys, ids, obs, cold] = draws.parts();
  SampleBuffers out = draws.buffers();
  REQUIRE(table->sample(n, 0.4, out).ok());
  std::vector<bool> is_cold(n, false);
  for (const ColdDraw& draw : cold) {
    is_cold[draw.row] = true;
    // The location names the row's id (spill_all): a key of a cold row maps to it.
    REQUIRE(draw.where.offset < 30);
  }
  std::size_t hot = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    if (is_cold[i]) continue;
    ++hot;
    REQUIRE(ids[i] >= 30);
    REQUIRE(obs[i * kValues] == static_cast<float>(ids[i]));
  }
  // Uniform over 40 items, 30 cold: about 3/4 of the draws.
  REQUIRE(cold.size() > n * 65 / 100);
  REQUIRE(cold.size() < n * 85 / 100);
  REQUIRE(hot + cold.size() == n);
}

TEST_CASE("a cold row retired by max_times_sampled in its own sample is still read back") {
  TableConfig config = tier_config(100, 10);
  config.max_times_sampled = 1;  // every draw removes its item at once
  auto table = make_table(config);
  const auto keys = insert_ids(*table, 0, 40);
  spill_all(*table);
  const std::uint64_t n = 25;
  Draws draws(n);
  auto [drawn, ids, obs, cold] = draws.parts();
  SampleBuffers out = draws.buffers();
  REQUIRE(table->sample(n, 0.4, out).ok());
  REQUIRE(table->size() == 40 - n);
  // Every draw of a cold item (ids 0-29) is listed with its location though its item is
  // gone by the end of the sample; the hot ones are copied.
  const auto id_of = [&](std::uint64_t key) {
    return static_cast<std::uint64_t>(std::find(keys.begin(), keys.end(), key) - keys.begin());
  };
  std::vector<bool> listed(n, false);
  for (const ColdDraw& draw : cold) {
    listed[draw.row] = true;
    REQUIRE(draw.where.offset == id_of(drawn[draw.row]));  // spill_all: offset = id
  }
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t id = id_of(drawn[i]);
    REQUIRE(id < 40);
    REQUIRE(listed[i] == (id < 30));
    if (!listed[i]) REQUIRE(ids[i] == static_cast<std::int64_t>(id));
  }
}

TEST_CASE("prioritized draws over both tiers follow the priorities exactly (chi-square)") {
  auto table = make_table(tier_config(64, 8, SelectorKind::prioritized));
  const auto keys = insert_ids(*table, 0, 64);  // priority id + 1
  spill_all(*table);
  // Cold rows' priorities may change like any other.
  const std::vector<std::uint64_t> updated{keys[0], keys[1]};
  const std::vector<double> priorities{30.0, 0.5};
  REQUIRE(table->update_priorities(updated, priorities).ok());
  std::map<std::uint64_t, std::size_t> index;
  std::vector<double> expected_mass(64);
  for (std::size_t i = 0; i < 64; ++i) {
    index[keys[i]] = i;
    expected_mass[i] = static_cast<double>(i + 1);
  }
  expected_mass[0] = 30.0;
  expected_mass[1] = 0.5;
  const std::uint64_t n = 4096;
  std::vector<std::uint64_t> observed(64, 0);
  std::vector<std::uint64_t> drawn(n);
  std::vector<double> probabilities(n), weights(n);
  std::vector<std::uint32_t> times(n);
  std::vector<std::int64_t> ids(n);
  std::vector<float> obs(n * kValues);
  const std::vector<std::span<std::byte>> columns{std::as_writable_bytes(std::span(ids)),
                                                  std::as_writable_bytes(std::span(obs))};
  for (int round = 0; round < 25; ++round) {
    std::vector<ColdDraw> cold;
    SampleBuffers out{drawn, probabilities, weights, times, columns};
    out.cold = &cold;
    REQUIRE(table->sample(n, 0.4, out).ok());
    for (std::uint64_t key : drawn)
      ++observed[index.at(key)];
  }
  double total = 0;
  for (double mass : expected_mass)
    total += mass;
  std::vector<double> expected(64);
  for (std::size_t i = 0; i < 64; ++i)
    expected[i] = expected_mass[i] / total;
  const testing::ChiSquare result = testing::chi_square(observed, expected);
  INFO("chi2 " << result.statistic << " critical " << result.critical);
  REQUIRE(result.statistic < result.critical);
}

TEST_CASE("removing cold rows empties their segments' live counts; a reused slot is hot") {
  auto table = make_table(tier_config(40, 10));
  const auto keys = insert_ids(*table, 0, 40);
  spill_all(*table);
  REQUIRE(table->tier()->live_rows(0) == 10);
  const std::vector<std::uint64_t> first_ten(keys.begin(), keys.begin() + 10);
  REQUIRE(table->delete_keys(first_ten).deleted == 10);
  REQUIRE(table->tier()->live_rows(0) == 0);
  REQUIRE(table->tier()->cold_rows() == 20);
  // The full table's FIFO remover evicts the oldest (cold) rows as new ones come in.
  insert_ids(*table, 40, 20);
  REQUIRE(table->tier()->live_rows(1) == 0);
  REQUIRE(table->tier()->cold_rows() == 10);
  REQUIRE(table->tier()->hot_rows() == 30);
  spill_all(*table);
  REQUIRE(table->tier()->hot_rows() == 10);
}

TEST_CASE("a row removed while it is being written out stays removed") {
  auto table = make_table(tier_config(100, 2));
  const auto keys = insert_ids(*table, 0, 6);
  const std::vector<SpillRow> rows = table->choose_spill(64);
  REQUIRE(rows.size() == 4);
  REQUIRE(table->tier()->spilling_rows() == 4);
  const std::vector<std::uint64_t> removed{rows[1].key};
  REQUIRE(table->delete_keys(removed).deleted == 1);
  std::vector<ColdLocation> where(rows.size(),
                                  ColdLocation{.segment = 0, .bytes = 10, .offset = 0});
  table->finish_spill(rows, where);
  REQUIRE(table->tier()->cold_rows() == 3);
  REQUIRE(table->tier()->live_rows(0) == 3);
  REQUIRE(table->size() == 5);
  REQUIRE(table->tier()->hot_rows() == 2);
}

TEST_CASE("a failed write leaves the rows hot, chosen again first") {
  auto table = make_table(tier_config(100, 2));
  insert_ids(*table, 0, 6);
  const std::vector<SpillRow> first = table->choose_spill(2);
  table->abandon_spill(first);
  REQUIRE(table->tier()->spilling_rows() == 0);
  const std::vector<SpillRow> again = table->choose_spill(64);
  REQUIRE(again.size() == 4);
  REQUIRE(again[0].key == first[0].key);
  REQUIRE(again[1].key == first[1].key);
}

TEST_CASE("inserts wait while the writer is far behind, and sample refuses views and keys only") {
  auto table = make_table(tier_config(2000, 10));
  insert_ids(*table, 0, 10 + kFileTierSlackRows);
  REQUIRE(table->may_insert(1));
  insert_ids(*table, 1000, 1);
  REQUIRE_FALSE(table->may_insert(1));
  spill_all(*table);
  REQUIRE(table->may_insert(1));
  std::vector<std::uint64_t> keys(1);
  std::vector<double> probabilities(1), weights(1);
  std::vector<std::uint32_t> times(1);
  const SampleBuffers keys_only{keys, probabilities, weights, times, {}};
  const auto refused = table->sample(1, 0.4, keys_only);
  REQUIRE_FALSE(refused.ok());
  REQUIRE(refused.error().code == ErrorCode::failed_precondition);
  REQUIRE(refused.error().message.find("file tier") != std::string::npos);
}

TEST_CASE("an episodic table's file tier writes out every field but the reward, kept in RAM") {
  TableConfig config = tier_config(100000, 10);
  config.episodes.enabled = true;
  auto schema = Schema::create({Field{"obs", DType::float32, {4}}, Field{"rew", DType::float32, {}},
                                Field{"next_obs", DType::float32, {4}}});
  REQUIRE(schema.ok());
  config.schema = schema.value();
  auto table = make_table(config);
  const auto written = table->tier_field_bytes();
  REQUIRE(std::vector<std::uint64_t>(written.begin(), written.end()) ==
          std::vector<std::uint64_t>{16, 0, 16});
  // The reward column keeps every row (4 bytes each), the others the budget's rows.
  TableConfig in_ram = config;
  in_ram.file_tier = {};
  REQUIRE(table_bytes(config).data + 32 * 100000 > table_bytes(in_ram).data);
  REQUIRE(table_bytes(config).data < table_bytes(in_ram).data);

  // With nothing but the reward to write out, a file tier is refused by name.
  auto reward_only = Schema::create({Field{"rew", DType::float32, {}}});
  REQUIRE(reward_only.ok());
  config.schema = reward_only.value();
  config.episodes.bootstrap_fields = {};
  auto refused = Table::create(config);
  REQUIRE_FALSE(refused.ok());
  REQUIRE(refused.error().message.find("file_tier: the table has no field to write out") !=
          std::string::npos);
}

TEST_CASE("compaction moves exactly a segment's live rows; one removed meanwhile stays removed") {
  TierIndex index(20, 1);
  std::vector<std::uint64_t> keys(20, 0);
  for (std::uint32_t slot = 0; slot < 10; ++slot) {
    keys[slot] = 100 + slot;
    index.on_store(slot, keys[slot]);
  }
  const auto key_of = [&](std::uint32_t slot) { return keys[slot]; };
  const std::vector<SpillRow> spilled = index.choose_spill(64, key_of);
  REQUIRE(spilled.size() == 9);  // all but the newest: ram_rows 1
  for (const SpillRow& row : spilled) {
    index.on_spilled(row.slot, ColdLocation{.segment = 1, .bytes = 10, .offset = row.slot * 10u});
  }
  REQUIRE(index.live_rows(1) == 9);
  REQUIRE(index.live_bytes(1) == 90);
  for (std::uint32_t slot : {0u, 2u, 4u, 6u})
    index.on_release(slot);
  REQUIRE(index.cold_released() == 4);
  REQUIRE(index.live_bytes(1) == 50);  // slots 1, 3, 5, 7, 8

  // The model: the live slots of segment 1 and where every cold slot lies.
  std::vector<MoveRow> first = index.choose_moves(1, 3, 1 << 20);
  REQUIRE(first.size() == 3);
  std::vector<std::uint32_t> chosen;
  for (const MoveRow& row : first) {
    REQUIRE(row.from.segment == 1);
    REQUIRE(row.from.offset == row.slot * 10u);
    chosen.push_back(row.slot);
  }
  std::sort(chosen.begin(), chosen.end());
  REQUIRE(std::adjacent_find(chosen.begin(), chosen.end()) == chosen.end());
  // One of them is removed while its copy is written: its copy is dead space.
  const std::uint32_t removed = first.front().slot;
  index.on_release(removed);
  for (std::size_t i = 0; i < first.size(); ++i)
    index.on_moved(first[i], ColdLocation{.segment = 2, .bytes = 10, .offset = i * 10});
  REQUIRE_FALSE(index.cold(removed));
  REQUIRE(index.live_rows(2) == 2);
  REQUIRE(index.live_bytes(2) == 20);
  REQUIRE(index.live_rows(1) == 2);

  // A failed copy leaves the rows where they were, chosen again next time.
  const std::vector<MoveRow> failed = index.choose_moves(1, 1, 1 << 20);
  REQUIRE(failed.size() == 1);
  index.on_move_failed(failed);
  const std::uint64_t emptied = index.segments_emptied();
  const std::vector<MoveRow> rest = index.choose_moves(1, 100, 1 << 20);
  REQUIRE(rest.size() == 2);
  for (std::size_t i = 0; i < rest.size(); ++i)
    index.on_moved(rest[i], ColdLocation{.segment = 2, .bytes = 10, .offset = 100 + i * 10});
  REQUIRE(index.live_rows(1) == 0);
  REQUIRE(index.segments_emptied() == emptied + 1);
  REQUIRE(index.choose_moves(1, 100, 1 << 20).empty());
  REQUIRE(index.live_rows(2) == 4);
  REQUIRE(index.cold_rows() == 4);
  for (std::uint32_t slot : {1u, 3u, 5u, 7u, 8u}) {
    if (slot == removed) continue;
    REQUIRE(index.cold(slot));
    REQUIRE(index.location(slot).segment == 2);
  }
  // The bytes of a row's record travel with it: a byte budget takes at least one row.
  REQUIRE(index.choose_moves(2, 100, 1).size() == 1);
}

TEST_CASE("a file tier takes any remover: evictions of cold rows keep the live counts") {
  for (SelectorKind remover : {SelectorKind::uniform, SelectorKind::lifo, SelectorKind::min_heap,
                               SelectorKind::max_heap}) {
    TableConfig config = tier_config(100, 10);
    config.remover = remover;
    auto table = make_table(config);
    for (std::int64_t id = 0; id < 400; id += 20) {
      insert_ids(*table, id, 20);
      spill_all(*table);
    }
    const TierIndex& tier = *table->tier();
    REQUIRE(table->size() == 100);
    REQUIRE(tier.hot_rows() + tier.cold_rows() == 100);
    std::uint64_t live = 0;
    for (std::uint32_t segment = 0; segment < 40; ++segment)
      live += tier.live_rows(segment);
    REQUIRE(live == tier.cold_rows());
  }
}

TEST_CASE("the queue of hot rows forgets removed rows when no row goes past the budget") {
  // A budget no row goes past (fifo), and a remover that evicts hot rows (uniform): the
  // writer never takes the queue's front, so removed rows' entries must be dropped.
  for (auto [remover, ram_rows] : {std::pair{SelectorKind::fifo, std::uint64_t{200}},
                                   std::pair{SelectorKind::uniform, std::uint64_t{100}}}) {
    TableConfig config = tier_config(100, ram_rows);
    config.remover = remover;
    auto table = make_table(config);
    const TierIndex& tier = *table->tier();
    std::size_t most = 0;
    for (std::int64_t id = 0; id < 20000; id += 10) {
      insert_ids(*table, id, 10);
      spill_all(*table);
      most = std::max(most, tier.hot_order_entries());
    }
    REQUIRE(table->size() == 100);
    REQUIRE(most <= 2 * tier.hot_rows() + TierIndex::kHotOrderSlack + 1);
    REQUIRE(tier.cold_rows() == 0);  // every row within the budget: none went cold
  }
}

TEST_CASE("a file tier's table counts only the RAM budget of its rows") {
  TableConfig config = tier_config(100000, 1000);
  TableConfig in_ram = config;
  in_ram.file_tier = {};
  const auto tiered = table_bytes(config).total();
  const auto full = table_bytes(in_ram).total();
  REQUIRE(full > 800000000u);  // 100,000 rows of 8.4 KB
  // 1,000 rows and the writer's slack in RAM (9.5 MB), the tier's per-slot state, the stamps.
  const std::uint64_t resident = (1000 + kFileTierSlackRows) * fixed_row_bytes(config.schema);
  REQUIRE(table_bytes(config).data >= resident);
  REQUIRE(table_bytes(config).data < resident + 100000 * (kFileTierBytesPerSlot + 8) + 65536);
  REQUIRE(tiered < full / 20);
}

// A snapshot of a table with a file tier and the table read back from it.
std::unique_ptr<Table> through_snapshot(const Table& table, std::uint64_t* image_bytes = nullptr) {
  MemorySink sink;
  const std::vector<const Table*> tables{&table};
  REQUIRE(write_snapshot(tables, 1700000000000, sink).ok());
  if (image_bytes != nullptr) *image_bytes = sink.data().size();
  MemorySource source(sink.data());
  auto decoded = read_snapshot(source, SnapshotLimits{});
  INFO((decoded.ok() ? std::string() : decoded.error().message));
  REQUIRE(decoded.ok());
  REQUIRE(decoded->tables.size() == 1);
  return std::move(decoded->tables[0]);
}

TEST_CASE("a snapshot keeps where every cold row lies, the hot rows' bytes, and their order") {
  auto table = make_table(tier_config(100, 10));
  insert_ids(*table, 0, 100);
  spill_all(*table);
  insert_ids(*table, 100, 40);  // 40 cold ones evicted: 90 cold, 10 hot
  spill_all(*table);
  insert_ids(*table, 140, 5);  // 15 hot: 5 past the budget
  std::uint64_t image_bytes = 0;
  auto restored = through_snapshot(*table, &image_bytes);
  // The cold rows' cells are not in the image: it holds 20 rows' worth, not 100.
  REQUIRE(image_bytes < 30 * fixed_row_bytes(table->schema()));
  const TierIndex& before = *table->tier();
  const TierIndex& after = *restored->tier();
  REQUIRE(restored->config().file_tier == table->config().file_tier);
  REQUIRE(after.ram_rows() == before.ram_rows());
  REQUIRE(after.cold_rows() == before.cold_rows());
  REQUIRE(after.hot_rows() == before.hot_rows());
  for (std::uint32_t slot = 0; slot < 100; ++slot) {
    REQUIRE(after.cold(slot) == before.cold(slot));
    if (before.cold(slot)) {
      REQUIRE(after.location(slot).segment == before.location(slot).segment);
      REQUIRE(after.location(slot).offset == before.location(slot).offset);
      REQUIRE(after.location(slot).bytes == before.location(slot).bytes);
      REQUIRE(after.location(slot).raw == before.location(slot).raw);
    } else if (table->storage().occupied(slot)) {
      REQUIRE(std::memcmp(restored->storage().cell(1, slot), table->storage().cell(1, slot),
                          table->storage().item_bytes(1)) == 0);
    }
  }
  for (std::uint32_t segment = 0; segment < 16; ++segment)
    REQUIRE(after.live_rows(segment) == before.live_rows(segment));
  // The 5 rows past the budget go cold next, oldest first, as they would have.
  const auto next = restored->choose_spill(64);
  const auto expected = table->choose_spill(64);
  REQUIRE(next.size() == 5);
  REQUIRE(next.size() == expected.size());
  for (std::size_t i = 0; i < next.size(); ++i) {
    REQUIRE(next[i].slot == expected[i].slot);
    REQUIRE(next[i].key == expected[i].key);
  }
}

TEST_CASE("a restored tiered table draws cold rows at their locations, and evicts them") {
  auto table = make_table(tier_config(100, 10));
  insert_ids(*table, 0, 100);
  spill_all(*table);
  auto restored = through_snapshot(*table);
  const std::uint64_t n = 500;
  Draws draws(n);
  auto [keys, ids, obs, cold] = draws.parts();
  SampleBuffers out = draws.buffers();
  REQUIRE(restored->sample(n, 0.4, out).ok());
  REQUIRE(!cold.empty());
  for (const ColdDraw& draw : cold) {
    // spill_all's locations name the row's id; the key's slot holds that id in the original.
    std::int64_t id;
    const std::uint64_t mask = (std::uint64_t{1} << table->storage().slot_bits()) - 1;
    std::memcpy(&id, table->storage().cell(0, static_cast<std::uint32_t>(keys[draw.row] & mask)),
                8);
    REQUIRE(draw.where.offset == static_cast<std::uint64_t>(id));
  }
  // FIFO eviction of the restored table empties the oldest segments first.
  REQUIRE(restored->tier()->live_rows(0) == 10);
  insert_ids(*restored, 100, 10);
  REQUIRE(restored->tier()->live_rows(0) == 0);
  REQUIRE(restored->tier()->live_rows(1) == 10);
}

TEST_CASE("a deleted cold row is left out of the image; the others restore cold") {
  auto table = make_table(tier_config(100, 10));
  insert_ids(*table, 0, 50);
  spill_all(*table);
  const std::vector<std::uint64_t> first{table->storage().key(0)};
  REQUIRE(table->delete_keys(first).deleted == 1);
  auto restored = through_snapshot(*table);
  REQUIRE_FALSE(restored->tier()->cold(0));
  REQUIRE(restored->tier()->cold_rows() == 39);
}

}  // namespace
}  // namespace replayd
