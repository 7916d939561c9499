// Tests of service/snapshot/snapshot_restore.h: at start the newest snapshot that decodes
// completely is restored (a damaged or truncated newest one falls back to the previous),
// merged with the configured tables by description; with no usable snapshot the server
// refuses to start unless allowed, and then keeps every existing snapshot.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/table/table.h"
#include "service/snapshot/snapshot_files.h"
#include "service/snapshot/snapshot_restore.h"

using namespace replayd;
using namespace replayd::service;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("replayd-snapshot-restore-" + std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string str() const { return path.string(); }
};

TableConfig config_named(std::string name, std::uint32_t capacity = 64) {
  TableConfig config;
  config.name = std::move(name);
  config.schema = Schema::create({Field{"x", DType::int64, {}}}).value();
  config.capacity = capacity;
  config.seed = 3;
  return config;
}

std::unique_ptr<Table> filled(const TableConfig& config, std::uint64_t items) {
  auto table = Table::create(config).value();
  std::vector<std::int64_t> values(items);
  for (std::uint64_t i = 0; i < items; ++i)
    values[i] = static_cast<std::int64_t>(i);
  std::vector<std::uint64_t> keys(items);
  const auto column = std::as_bytes(std::span(values));
  if (items > 0) REQUIRE(table->insert(std::span(&column, 1), items, {}, keys));
  return table;
}

// Writes snapshot `sequence` of the given tables into `dir`; returns its path.
std::string snapshot(const TempDir& dir, std::uint64_t sequence,
                     const std::vector<const Table*>& tables) {
  auto written = write_snapshot_file(dir.str(), sequence, [&](SnapshotSink& sink) {
    return write_snapshot(tables, 1700000000000, sink);
  });
  REQUIRE(written);
  return written->path;
}

void flip_byte(const std::string& path, std::uint64_t offset) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(static_cast<std::streamoff>(offset));
  char byte = 0;
  file.read(&byte, 1);
  byte = static_cast<char>(byte ^ 0x10);
  file.seekp(static_cast<std::streamoff>(offset));
  file.write(&byte, 1);
}

void truncate_to(const std::string& path, std::uint64_t bytes) {
  fs::resize_file(path, bytes);
}

std::uint32_t size_of(const TableRegistry& registry, std::string_view name) {
  auto hosted = registry.find(name);
  REQUIRE(hosted != nullptr);
  return hosted->table->size();
}

}  // namespace

TEST_CASE("with no snapshot every configured table starts empty") {
  TempDir dir;
  TableRegistry registry;
  auto outcome =
      restore_tables(dir.str(), {config_named("a"), config_named("b")}, Limits{}, false, registry);
  REQUIRE(outcome);
  CHECK(outcome->newest_sequence == 0);
  CHECK(outcome->kept_through == 0);
  CHECK(registry.size() == 2);
  CHECK(size_of(registry, "a") == 0);
  CHECK(size_of(registry, "b") == 0);
}

TEST_CASE("a missing data directory counts as holding no snapshot") {
  TempDir dir;
  TableRegistry registry;
  auto outcome = restore_tables((dir.path / "not-yet").string(), {config_named("a")}, Limits{},
                                false, registry);
  REQUIRE(outcome);
  CHECK(outcome->newest_sequence == 0);
  CHECK(registry.size() == 1);
}

TEST_CASE("the newest snapshot is restored and new snapshots number after it") {
  TempDir dir;
  const auto config = config_named("a");
  auto old_table = filled(config, 3);
  auto new_table = filled(config, 9);
  snapshot(dir, 4, {old_table.get()});
  snapshot(dir, 11, {new_table.get()});
  TableRegistry registry;
  auto outcome = restore_tables(dir.str(), {config}, Limits{}, false, registry);
  REQUIRE(outcome);
  CHECK(outcome->newest_sequence == 11);
  CHECK(outcome->kept_through == 0);
  CHECK(size_of(registry, "a") == 9);
}

TEST_CASE("a newest snapshot with a flipped byte is detected and the previous one is used") {
  TempDir dir;
  const auto config = config_named("a");
  auto old_table = filled(config, 5);
  auto new_table = filled(config, 20);
  snapshot(dir, 1, {old_table.get()});
  const auto newest = snapshot(dir, 2, {new_table.get()});
  flip_byte(newest, fs::file_size(newest) / 2);
  TableRegistry registry;
  auto outcome = restore_tables(dir.str(), {config}, Limits{}, false, registry);
  REQUIRE(outcome);
  CHECK(outcome->newest_sequence == 2);  // still numbered after the damaged file
  CHECK(size_of(registry, "a") == 5);
}

TEST_CASE("a truncated newest snapshot is refused and the previous one is used") {
  TempDir dir;
  const auto config = config_named("a");
  auto old_table = filled(config, 7);
  auto new_table = filled(config, 30);
  snapshot(dir, 1, {old_table.get()});
  const auto newest = snapshot(dir, 2, {new_table.get()});
  truncate_to(newest, fs::file_size(newest) - 1);
  TableRegistry registry;
  auto outcome = restore_tables(dir.str(), {config}, Limits{}, false, registry);
  REQUIRE(outcome);
  CHECK(size_of(registry, "a") == 7);
}

TEST_CASE(
    "when no snapshot can be restored the server refuses to start, naming the newest reason") {
  TempDir dir;
  const auto config = config_named("a");
  auto table = filled(config, 4);
  const auto first = snapshot(dir, 1, {table.get()});
  const auto second = snapshot(dir, 2, {table.get()});
  truncate_to(first, 10);
  flip_byte(second, 20);
  TableRegistry registry;
  auto outcome = restore_tables(dir.str(), {config}, Limits{}, false, registry);
  REQUIRE_FALSE(outcome);
  CHECK(outcome.error().code == ErrorCode::failed_precondition);
  CHECK_THAT(outcome.error().message, Contains("no snapshot in data_dir") && Contains("2 found") &&
                                          Contains(second) && Contains("refusing to start") &&
                                          Contains("--allow-empty-start"));
  CHECK(fs::exists(first));
  CHECK(fs::exists(second));
}

TEST_CASE("a snapshot over the limits counts as unusable, and the error says to raise them") {
  TempDir dir;
  auto a = filled(config_named("a"), 1);
  auto b = filled(config_named("b"), 1);
  snapshot(dir, 1, {a.get(), b.get()});
  Limits limits;
  limits.max_tables = 1;
  TableRegistry registry;
  auto outcome = restore_tables(dir.str(), {}, limits, false, registry);
  REQUIRE_FALSE(outcome);
  CHECK_THAT(outcome.error().message, Contains("max_tables") && Contains("raise"));
}

TEST_CASE("allow_empty_start serves empty tables and keeps every existing snapshot") {
  TempDir dir;
  const auto config = config_named("a");
  auto table = filled(config, 4);
  const auto only = snapshot(dir, 6, {table.get()});
  truncate_to(only, 40);
  TableRegistry registry;
  auto outcome = restore_tables(dir.str(), {config}, Limits{}, true, registry);
  REQUIRE(outcome);
  CHECK(outcome->newest_sequence == 6);
  CHECK(outcome->kept_through == 6);
  CHECK(read_kept_through(dir.str()) == 6);
  CHECK(size_of(registry, "a") == 0);
  CHECK(fs::exists(only));
}

TEST_CASE("the retention floor persists until a start restores one of the kept snapshots") {
  TempDir dir;
  const auto config = config_named("a");
  auto table = filled(config, 4);
  snapshot(dir, 3, {table.get()});
  REQUIRE(write_kept_through(dir.str(), 3));

  auto empty = Table::create(config).value();
  const auto later = snapshot(dir, 4, {empty.get()});  // written while serving empty tables
  {
    TableRegistry registry;
    auto outcome = restore_tables(dir.str(), {config}, Limits{}, false, registry);
    REQUIRE(outcome);
    CHECK(outcome->kept_through == 3);  // restored 4, above the floor: the floor stays
    CHECK(read_kept_through(dir.str()) == 3);
  }
  fs::remove(later);
  {
    TableRegistry registry;
    auto outcome = restore_tables(dir.str(), {config}, Limits{}, false, registry);
    REQUIRE(outcome);
    CHECK(outcome->kept_through == 0);  // restored the kept snapshot 3: the floor goes
    CHECK(read_kept_through(dir.str()) == 0);
    CHECK(size_of(registry, "a") == 4);
  }
}

TEST_CASE("a configured table whose description changed starts empty as configured") {
  TempDir dir;
  auto table = filled(config_named("a", 64), 10);
  snapshot(dir, 1, {table.get()});
  TableRegistry registry;
  auto outcome = restore_tables(dir.str(), {config_named("a", 128)}, Limits{}, false, registry);
  REQUIRE(outcome);
  auto hosted = registry.find("a");
  REQUIRE(hosted != nullptr);
  CHECK(hosted->table->size() == 0);
  CHECK(hosted->table->config().capacity == 128);
}

TEST_CASE("a different seed alone does not stop a table from being restored") {
  TempDir dir;
  auto table = filled(config_named("a"), 10);
  snapshot(dir, 1, {table.get()});
  auto reseeded = config_named("a");
  reseeded.seed = 999;
  TableRegistry registry;
  REQUIRE(restore_tables(dir.str(), {reseeded}, Limits{}, false, registry));
  CHECK(size_of(registry, "a") == 10);
}

TEST_CASE("tables created at run time are restored and new configured ones start empty") {
  TempDir dir;
  auto runtime = filled(config_named("made_by_client"), 6);
  snapshot(dir, 1, {runtime.get()});
  TableRegistry registry;
  auto outcome =
      restore_tables(dir.str(), {config_named("new_in_config")}, Limits{}, false, registry);
  REQUIRE(outcome);
  CHECK(registry.size() == 2);
  CHECK(size_of(registry, "made_by_client") == 6);
  CHECK(size_of(registry, "new_in_config") == 0);
}

TEST_CASE("run-time tables past max_tables are not restored") {
  TempDir dir;
  auto x = filled(config_named("x"), 1);
  auto y = filled(config_named("y"), 2);
  snapshot(dir, 1, {x.get(), y.get()});
  Limits limits;
  limits.max_tables = 2;
  TableRegistry registry;
  auto outcome = restore_tables(dir.str(), {config_named("configured")}, limits, false, registry);
  REQUIRE(outcome);
  CHECK(registry.size() == 2);
  CHECK(registry.find("configured") != nullptr);
}

TEST_CASE("a configured table that cannot be created is an error") {
  TempDir dir;
  auto config = config_named("a", 1000);
  Limits limits;
  limits.max_table_bytes = 100;
  TableRegistry registry;
  auto outcome = restore_tables(dir.str(), {config}, limits, false, registry);
  REQUIRE_FALSE(outcome);
  CHECK(outcome.error().code == ErrorCode::resource_exhausted);
  CHECK_THAT(outcome.error().message, Contains("max_table_bytes"));
}

TEST_CASE("describe_difference names each changed key with the snapshot's value first") {
  const auto a = config_named("a", 64);
  CHECK(describe_difference(a, a).empty());
  auto reseeded = a;
  reseeded.seed = 1;
  CHECK(describe_difference(a, reseeded).empty());
  auto bigger = a;
  bigger.capacity = 128;
  bigger.max_times_sampled = 2;
  const auto text = describe_difference(a, bigger);
  CHECK_THAT(text, Contains("capacity: 64 in the snapshot, 128 in the config") &&
                       Contains("max_times_sampled: 0 in the snapshot, 2 in the config"));
  CHECK_THAT(text, !Contains("seed"));
}

// An episodic table's description has keys ("episodic", "reward"...) a plain one has not.
TEST_CASE("describe_difference names a key present only in the snapshot's description") {
  TableConfig plain;
  plain.name = "t";
  plain.schema =
      Schema::create({Field{"obs", DType::float32, {}}, Field{"rew", DType::float32, {}}}).value();
  plain.capacity = 16;
  TableConfig episodic = plain;
  episodic.episodes.enabled = true;
  episodic.episodes.bootstrap_fields = {};
  const auto text = describe_difference(episodic, plain);
  CHECK_FALSE(text.empty());
  CHECK_THAT(text, Contains("episodic") && Contains("in the snapshot"));
}
