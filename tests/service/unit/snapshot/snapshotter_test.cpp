// Tests of service/snapshot/snapshotter.h: a run forks a child that writes every table to
// the data directory while the io_context goes on; requests during a run share the next
// one; retention keeps the newest snapshots; a failed run is reported and keeps the earlier
// snapshots; the final snapshot is written in process at shutdown.
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/table/table.h"
#include "service/snapshot/snapshot_files.h"
#include "service/snapshot/snapshotter.h"

using namespace replayd;
using namespace replayd::service;
using Catch::Contains;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("replayd-snapshotter-" + std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string str() const { return path.string(); }
};

void add_table(TableRegistry& registry, std::string name, std::uint64_t items) {
  TableConfig config;
  config.name = std::move(name);
  config.schema = Schema::create({Field{"x", DType::int64, {}}}).value();
  config.capacity = 32;
  auto table = Table::create(config).value();
  std::vector<std::int64_t> values(items, 5);
  std::vector<std::uint64_t> keys(items);
  const auto column = std::as_bytes(std::span(values));
  if (items > 0) REQUIRE(table->insert(std::span(&column, 1), items, {}, keys));
  registry.add(std::move(table));
}

// Runs the io_context until `run` has an outcome (the child is quick; 10 s is a hang).
const SnapshotOutcome& wait_for(asio::io_context& io, Snapshotter& snapshotter, std::uint64_t run) {
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (snapshotter.outcome(run) == nullptr && std::chrono::steady_clock::now() < give_up) {
    io.restart();
    io.run_for(5ms);
  }
  REQUIRE(snapshotter.outcome(run) != nullptr);
  return *snapshotter.outcome(run);
}

std::vector<std::uint64_t> sequences_in(const std::string& dir) {
  const auto listed = list_snapshots(dir);
  REQUIRE(listed);
  std::vector<std::uint64_t> sequences;
  for (const auto& file : *listed)
    sequences.push_back(file.sequence);
  return sequences;
}

}  // namespace

TEST_CASE("a snapshotter without a data directory is disabled and writes no final snapshot") {
  asio::io_context io;
  TableRegistry registry;
  Snapshotter snapshotter(io, registry, SnapshotOptions{});
  CHECK_FALSE(snapshotter.enabled());
  const SnapshotOutcome final_outcome = snapshotter.write_final();
  CHECK(final_outcome.status.ok());
  CHECK(final_outcome.path.empty());
}

TEST_CASE("a requested snapshot holds every table and is numbered after the newest found") {
  TempDir dir;
  asio::io_context io;
  TableRegistry registry;
  add_table(registry, "a", 3);
  add_table(registry, "b", 10);
  Snapshotter snapshotter(io, registry, SnapshotOptions{dir.str(), 0, 3, 0, {}});
  REQUIRE(snapshotter.enabled());
  snapshotter.set_newest_sequence(41);
  const std::uint64_t run = snapshotter.request();
  CHECK(snapshotter.outcome(run) == nullptr);  // the child writes while we go on
  const SnapshotOutcome& outcome = wait_for(io, snapshotter, run);
  INFO((outcome.status ? std::string() : outcome.status.error().message));
  REQUIRE(outcome.status.ok());
  CHECK(fs::path(outcome.path).filename() == "snapshot-00000000000000000042.rsnap");
  CHECK(outcome.stats.tables == 2);
  CHECK(outcome.stats.items == 13);
  CHECK(outcome.stats.bytes == fs::file_size(outcome.path));
  CHECK(outcome.duration_ms >= 0);
  CHECK(outcome.stall_ms >= 0);
  auto decoded = read_snapshot_file(outcome.path, SnapshotLimits{});
  REQUIRE(decoded);
  REQUIRE(decoded->tables.size() == 2);
  CHECK(decoded->tables[1]->size() == 10);
}

TEST_CASE("requests during a run share one queued run that starts when the first ends") {
  TempDir dir;
  asio::io_context io;
  TableRegistry registry;
  add_table(registry, "a", 1);
  Snapshotter snapshotter(io, registry, SnapshotOptions{dir.str(), 0, 5, 0, {}});
  const std::uint64_t first = snapshotter.request();
  const std::uint64_t second = snapshotter.request();
  const std::uint64_t third = snapshotter.request();
  CHECK(second != first);
  CHECK(third == second);
  CHECK(wait_for(io, snapshotter, first).status.ok());
  CHECK(wait_for(io, snapshotter, second).status.ok());
  CHECK(sequences_in(dir.str()) == std::vector<std::uint64_t>{2, 1});
}

TEST_CASE("waiters on finished are woken when a run ends") {
  TempDir dir;
  asio::io_context io;
  TableRegistry registry;
  Snapshotter snapshotter(io, registry, SnapshotOptions{dir.str(), 0, 3, 0, {}});
  std::optional<WaitOutcome> woke;
  const std::uint64_t run = snapshotter.request();
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        WaitQueue::Waiter waiter(snapshotter.finished(), co_await asio::this_coro::executor);
        woke = co_await waiter.wait(std::chrono::steady_clock::now() + 10s);
        waiter.leave();
      },
      asio::detached);
  wait_for(io, snapshotter, run);
  io.restart();
  io.poll();
  REQUIRE(woke.has_value());
  CHECK(*woke == WaitOutcome::woken);
}

TEST_CASE("only the newest `keep` snapshots stay, and never those up to the retention floor") {
  TempDir dir;
  asio::io_context io;
  TableRegistry registry;
  add_table(registry, "a", 2);
  Snapshotter snapshotter(io, registry, SnapshotOptions{dir.str(), 0, 2, 0, {}});
  snapshotter.set_newest_sequence(0, 1);
  for (int i = 0; i < 4; ++i)
    REQUIRE(wait_for(io, snapshotter, snapshotter.request()).status.ok());
  CHECK(sequences_in(dir.str()) == std::vector<std::uint64_t>{4, 3, 1});
}

TEST_CASE("a run that cannot write is reported as resource_exhausted and earlier ones stay") {
  TempDir dir;
  asio::io_context io;
  TableRegistry registry;
  add_table(registry, "a", 2);
  Snapshotter snapshotter(io, registry, SnapshotOptions{dir.str(), 0, 3, 0, {}});
  const SnapshotOutcome& first = wait_for(io, snapshotter, snapshotter.request());
  REQUIRE(first.status.ok());
  const std::string first_path = first.path;
  // A non-empty directory where snapshot 2 would be renamed to makes the write fail.
  const fs::path in_the_way = dir.path / "snapshot-00000000000000000002.rsnap";
  fs::create_directories(in_the_way / "occupied");
  const SnapshotOutcome& failed = wait_for(io, snapshotter, snapshotter.request());
  REQUIRE_FALSE(failed.status.ok());
  CHECK(failed.status.error().code == ErrorCode::resource_exhausted);
  CHECK_FALSE(failed.status.error().message.empty());
  CHECK(failed.path.empty());
  CHECK(fs::exists(first_path));
  CHECK(remove_snapshot_temporaries(dir.str()) == 0);
  fs::remove_all(in_the_way);
  const SnapshotOutcome& next = wait_for(io, snapshotter, snapshotter.request());
  REQUIRE(next.status.ok());  // serving and snapshotting go on after a failure
  CHECK(fs::path(next.path).filename() == "snapshot-00000000000000000003.rsnap");
}

TEST_CASE("outcomes of the last 16 runs are remembered") {
  TempDir dir;
  asio::io_context io;
  TableRegistry registry;
  Snapshotter snapshotter(io, registry, SnapshotOptions{dir.str(), 0, 1, 0, {}});
  std::uint64_t last = 0;
  for (int i = 0; i < 17; ++i) {
    last = snapshotter.request();
    REQUIRE(wait_for(io, snapshotter, last).status.ok());
  }
  CHECK(snapshotter.outcome(1) == nullptr);
  CHECK(snapshotter.outcome(2) != nullptr);
  CHECK(snapshotter.outcome(last) != nullptr);
  CHECK(snapshotter.outcome(last + 1) == nullptr);
  CHECK(sequences_in(dir.str()) == std::vector<std::uint64_t>{17});
}

TEST_CASE("stop cancels waiters on finished with shutting_down") {
  TempDir dir;
  asio::io_context io;
  TableRegistry registry;
  Snapshotter snapshotter(io, registry, SnapshotOptions{dir.str(), 3600, 3, 0, {}});
  snapshotter.start();
  std::optional<WaitOutcome> outcome;
  std::optional<CancelReason> reason;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        WaitQueue::Waiter waiter(snapshotter.finished(), co_await asio::this_coro::executor);
        outcome = co_await waiter.wait(std::nullopt);
        reason = waiter.cancel_reason();
        waiter.leave();
      },
      asio::detached);
  io.poll();
  snapshotter.stop();
  io.restart();
  io.run_for(20ms);  // the periodic timer is cancelled too, so run() has nothing left
  REQUIRE(outcome.has_value());
  CHECK(*outcome == WaitOutcome::cancelled);
  CHECK(reason == CancelReason::shutting_down);
  CHECK(io.stopped());
  CHECK(sequences_in(dir.str()).empty());
}

TEST_CASE("the final snapshot is written in process after a running child is ended") {
  TempDir dir;
  asio::io_context io;
  TableRegistry registry;
  add_table(registry, "a", 7);
  Snapshotter snapshotter(io, registry, SnapshotOptions{dir.str(), 0, 3, 0, {}});
  snapshotter.request();  // a child is running (or done) and nobody reaps it on the io_context
  snapshotter.stop();
  const SnapshotOutcome final_outcome = snapshotter.write_final();
  REQUIRE(final_outcome.status.ok());
  CHECK(fs::path(final_outcome.path).filename() == "snapshot-00000000000000000002.rsnap");
  CHECK(final_outcome.stats.items == 7);
  const auto listed = list_snapshots(dir.str());
  REQUIRE(listed);
  REQUIRE_FALSE(listed->empty());
  CHECK(listed->front().path == final_outcome.path);
  CHECK(remove_snapshot_temporaries(dir.str()) == 0);  // no partial file is left behind
}
