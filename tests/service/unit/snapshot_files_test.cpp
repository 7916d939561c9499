// Tests of service/snapshot/snapshot_files.h: snapshot file names, crash-safe writes, listing newest
// first, pruning that keeps the newest and never goes below the retention floor, leftovers of
// interrupted writes, and reading a file back into tables.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/table/table.h"
#include "service/snapshot/snapshot_files.h"

using namespace replayd;
using namespace replayd::service;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("replayd-snapshot-files-" + std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string str() const { return path.string(); }
};

std::unique_ptr<Table> filled_table(std::uint64_t items) {
  TableConfig config;
  config.name = std::string("t");
  config.schema = Schema::create({Field{"x", DType::int64, {}}}).value();
  config.capacity = 64;
  config.seed = 3;
  auto table = Table::create(config).value();
  std::vector<std::int64_t> values(items);
  for (std::uint64_t i = 0; i < items; ++i)
    values[i] = static_cast<std::int64_t>(i * 7);
  std::vector<std::uint64_t> keys(items);
  const std::span<const std::byte> column(reinterpret_cast<const std::byte*>(values.data()),
                                          items * sizeof(std::int64_t));
  REQUIRE(table->insert(std::span(&column, 1), items, {}, keys));
  return table;
}

Result<WrittenSnapshot> write(const TempDir& dir, std::uint64_t sequence, const Table& table) {
  const Table* tables[] = {&table};
  return write_snapshot_file(dir.str(), sequence, [&](SnapshotSink& sink) {
    return write_snapshot(tables, 1700000000000, sink);
  });
}

}  // namespace

TEST_CASE("a written snapshot reads back as the same tables") {
  TempDir dir;
  auto table = filled_table(10);
  auto written = write(dir, 7, *table);
  REQUIRE(written);
  CHECK(fs::path(written->path).filename() == "snapshot-00000000000000000007.rsnap");
  CHECK(written->stats.items == 10);
  auto decoded = read_snapshot_file(written->path, SnapshotLimits{});
  REQUIRE(decoded);
  REQUIRE(decoded->tables.size() == 1);
  CHECK(decoded->tables[0]->size() == 10);
  CHECK(decoded->tables[0]->name() == "t");
}

TEST_CASE("a failed write leaves no snapshot and no temporary file") {
  TempDir dir;
  auto failed = write_snapshot_file(dir.str(), 3, [](SnapshotSink& sink) -> Result<SnapshotStats> {
    const std::byte some[4]{};
    REQUIRE(sink.write(some));
    return make_error(ErrorCode::resource_exhausted, "disk full (simulated)");
  });
  REQUIRE_FALSE(failed);
  CHECK_THAT(failed.error().message, Catch::Contains("disk full"));
  CHECK(fs::is_empty(dir.path));
}

TEST_CASE("snapshots list newest first; leftovers of interrupted writes are not listed") {
  TempDir dir;
  auto table = filled_table(2);
  for (std::uint64_t sequence : {2, 11, 5})
    REQUIRE(write(dir, sequence, *table));
  std::ofstream(dir.path / "snapshot-00000000000000000012.rsnap.tmp") << "partial";
  std::ofstream(dir.path / "notes.txt") << "not a snapshot";
  auto listed = list_snapshots(dir.str());
  REQUIRE(listed);
  REQUIRE(listed->size() == 3);
  CHECK((*listed)[0].sequence == 11);
  CHECK((*listed)[1].sequence == 5);
  CHECK((*listed)[2].sequence == 2);
  CHECK(remove_snapshot_temporaries(dir.str()) == 1);
  CHECK(fs::exists(dir.path / "notes.txt"));
  auto missing = list_snapshots((dir.path / "missing").string());
  REQUIRE(missing);
  CHECK(missing->empty());
}

TEST_CASE("pruning keeps the newest, and never deletes at or below the retention floor") {
  TempDir dir;
  auto table = filled_table(1);
  for (std::uint64_t sequence = 1; sequence <= 6; ++sequence)
    REQUIRE(write(dir, sequence, *table));
  CHECK(prune_snapshots(dir.str(), 4, /*kept_through=*/2) == 0);  // 3..6 are the newest 4
  CHECK(prune_snapshots(dir.str(), 2, /*kept_through=*/2) == 2);  // 3 and 4 go, 1 and 2 stay
  auto listed = list_snapshots(dir.str());
  REQUIRE(listed);
  std::vector<std::uint64_t> left;
  for (const auto& file : *listed)
    left.push_back(file.sequence);
  CHECK(left == std::vector<std::uint64_t>{6, 5, 2, 1});
  CHECK(read_kept_through(dir.str()) == 0);
  REQUIRE(write_kept_through(dir.str(), 2));
  CHECK(read_kept_through(dir.str()) == 2);
  REQUIRE(write_kept_through(dir.str(), 0));
  CHECK(read_kept_through(dir.str()) == 0);
}

TEST_CASE("a damaged snapshot file is refused with an error naming the file") {
  TempDir dir;
  auto table = filled_table(5);
  auto written = write(dir, 1, *table);
  REQUIRE(written);
  fs::resize_file(written->path, fs::file_size(written->path) / 2);
  auto decoded = read_snapshot_file(written->path, SnapshotLimits{});
  REQUIRE_FALSE(decoded);
  CHECK_THAT(decoded.error().message, Catch::Contains(written->path));
  CHECK_FALSE(
      ensure_snapshot_dir((dir.path / "snapshot-00000000000000000001.rsnap" / "x").string()));
}
