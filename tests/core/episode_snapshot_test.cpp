// Tests for core/episode_snapshot.* (and the episodic parts of core/table_snapshot.*): a
// restored episodic table keeps its episodes and gives the same n-step and sequence draws
// for the same seed; damaged episode sections are rejected; tables that are not episodic
// keep the old layout.
#include "core/snapshot/episode_snapshot.h"

#include <catch2/catch.hpp>

#include <vector>

#include "core/snapshot/table_snapshot.h"
#include "tests/core/episode_fixtures.h"

namespace replayd {
namespace {

using namespace testing;
using Catch::Matchers::Contains;

// Random episodic operations chosen by `seed`: appends across three environments of two
// writers, ends, deletes, priority updates, a writer leaving, n-step and sequence draws.
// Every outcome is logged; two tables in the same state give the same log.
std::vector<double> run_workload(Table& table, std::uint64_t seed, int count) {
  Rng ops(seed);
  std::vector<double> log;
  std::vector<std::uint64_t> keys_seen;
  std::int64_t next_id = 1000 * static_cast<std::int64_t>(seed);
  // A restored table continues the episodes that were open: find them again.
  std::uint64_t current[2][3] = {};
  for (std::uint64_t writer = 0; writer < 2; ++writer) {
    auto open = table.episodic()->episodes().open_episodes(writer);
    for (std::size_t env = 0; env < 3 && env < open.size(); ++env)
      current[writer][env] = open[env];
  }
  for (int op = 0; op < count; ++op) {
    const std::uint64_t writer = ops.uniform_below(2);
    const auto kind = ops.uniform_below(20);
    const auto env = ops.uniform_below(3);
    if (kind < 10) {
      if (current[writer][env] == 0)
        current[writer][env] = table.episodic()->open_episode(writer).value();
      std::vector<std::uint64_t> keys;
      const std::int64_t id = next_id++;
      REQUIRE(append(table, writer, {current[writer][env]}, {id},
                     {static_cast<float>(ops.uniform_below(4))}, keys,
                     {0.5 + static_cast<double>(ops.uniform_below(4))})
                  .ok());
      keys_seen.push_back(keys[0]);
      log.push_back(static_cast<double>(keys[0]));
    } else if (kind < 13) {
      const auto episode = current[writer][env];
      if (episode == 0) continue;
      const bool ok = table.episodic()
                          ->end_episode(writer, episode,
                                        kind == 10 ? EpisodeEnd::terminated : EpisodeEnd::truncated)
                          .ok();
      log.push_back(ok);
      current[writer][env] = 0;
    } else if (kind == 13 && !keys_seen.empty()) {
      const auto key = keys_seen[ops.uniform_below(keys_seen.size())];
      log.push_back(static_cast<double>(table.delete_keys(std::span(&key, 1)).deleted));
    } else if (kind == 14 && !keys_seen.empty()) {
      const auto key = keys_seen[ops.uniform_below(keys_seen.size())];
      const double priority = static_cast<double>(ops.uniform_below(5));
      log.push_back(static_cast<double>(
          table.update_priorities(std::span(&key, 1), std::span(&priority, 1))->applied));
    } else if (kind == 15) {
      log.push_back(static_cast<double>(table.episodic()->end_writer(writer)));
      for (auto& episode : current[writer])
        episode = 0;
    } else if (kind < 18) {
      auto d = sample_nstep(table, 3, {1 + static_cast<std::uint32_t>(kind - 16) * 2, 0.9, 0.5});
      log.push_back(d.status.ok());
      if (!d.status.ok()) continue;
      for (std::size_t i = 0; i < 3; ++i) {
        log.insert(log.end(), {static_cast<double>(d.keys[i]), d.probabilities[i], d.weights[i],
                               static_cast<double>(d.times[i]), d.returns[i], d.bootstrap[i],
                               d.discounts[i], static_cast<double>(d.steps[i])});
      }
    } else {
      auto d = sample_sequences(table, 2, {3, 1, 1, kind == 18, 0.5});
      log.push_back(d.status.ok());
      if (!d.status.ok()) continue;
      log.insert(log.end(), d.probabilities.begin(), d.probabilities.end());
      log.insert(log.end(), d.id.begin(), d.id.end());
      log.insert(log.end(), d.mask.begin(), d.mask.end());
    }
  }
  // Reading everything and whole-episode draws after the workload.
  for (auto id : read_all_ids(table, 3))
    log.push_back(static_cast<double>(id));
  std::vector<std::uint64_t> ids(4);
  std::vector<double> probabilities(4);
  if (table.episodic()->sample_episodes(4, ids, probabilities).ok()) {
    log.insert(log.end(), ids.begin(), ids.end());
    log.insert(log.end(), probabilities.begin(), probabilities.end());
  }
  return log;
}

std::vector<std::byte> image_of(const Table& table) {
  MemorySink sink;
  const Table* tables[] = {&table};
  REQUIRE(write_snapshot(tables, 1700000000000, sink).ok());
  return sink.data();
}

Result<std::unique_ptr<Table>> restore(const std::vector<std::byte>& image) {
  MemorySource source(image);
  auto decoded = read_snapshot(source, SnapshotLimits{});
  if (!decoded) return decoded.error();
  REQUIRE(decoded->tables.size() == 1);
  return std::move(decoded->tables[0]);
}

TEST_CASE("a restored episodic table keeps its episodes and draws exactly as the original") {
  const bool prioritized = GENERATE(false, true);
  const std::uint32_t max_times = GENERATE(0u, 2u);
  const bool pad_history = GENERATE(true, false);  // false: burn-in never before a start
  CAPTURE(prioritized, max_times, pad_history);
  TableConfig config = episodic_config(19, prioritized, 31);
  config.max_times_sampled = max_times;
  config.episodes.pad_history = pad_history;
  auto original = make_table(config);
  run_workload(*original, 1, 400);  // evictions, holes, ended and open episodes
  auto restored = restore(image_of(*original));
  INFO((restored.ok() ? std::string() : restored.error().message));
  REQUIRE(restored.ok());
  CHECK((*restored)->config().episodes == original->config().episodes);
  CHECK((*restored)->episodic()->episodes().live_episodes() ==
        original->episodic()->episodes().live_episodes());
  CHECK((*restored)->episodic()->episodes().open_count() ==
        original->episodic()->episodes().open_count());
  CHECK(run_workload(**restored, 2, 600) == run_workload(*original, 2, 600));
  CHECK(image_of(**restored) == image_of(*original));
}

TEST_CASE("a restored table ends the episodes its gone writers left open, as truncated") {
  auto original = make_table(episodic_config(16));
  const auto a = original->episodic()->open_episode(1).value();
  const auto b = original->episodic()->open_episode(2).value();
  original->episodic()->open_episode(2).value();  // empty: forgotten
  std::vector<std::uint64_t> keys;
  REQUIRE(append(*original, 1, {a}, {1}, {1.0f}, keys).ok());
  REQUIRE(append(*original, 2, {b}, {2}, {1.0f}, keys).ok());
  auto restored = restore(image_of(*original));
  REQUIRE(restored.ok());
  Table& table = **restored;
  CHECK(table.episodic()->episodes().open_count() == 3);
  CHECK(table.episodic()->nstep_starts({2, 0.9, 0}).value() == 0);
  CHECK(table.episodic()->end_all_writers() == 2);
  CHECK(table.episodic()->episodes().open_count() == 0);
  CHECK(table.episodic()->episodes().find(a)->state == EpisodeState::truncated);
  CHECK(table.episodic()->episodes().find(b)->state == EpisodeState::truncated);
  CHECK(table.episodic()->nstep_starts({2, 0.9, 0}).value() ==
        2);  // short windows of ended episodes
}

TEST_CASE("an episodic image cut short in its episode sections is rejected") {
  auto original = make_table(episodic_config(8));
  run_workload(*original, 3, 60);
  const auto image = image_of(*original);
  auto full = restore(image);
  REQUIRE(full.ok());
  // Cut anywhere: restore fails with a reason and never crashes.
  for (std::size_t cut = 0; cut < image.size(); cut += 7) {
    std::vector<std::byte> part(image.begin(), image.begin() + static_cast<std::ptrdiff_t>(cut));
    CHECK_FALSE(restore(part).ok());
  }
}

TEST_CASE("episode sections naming a free slot or a stored step twice are rejected") {
  auto table = make_table(episodic_config(8));
  const auto episode = table->episodic()->open_episode(1).value();
  std::vector<std::uint64_t> keys;
  REQUIRE(append(*table, 1, {episode, episode}, {1, 2}, {1.0f, 1.0f}, keys).ok());
  const EpisodeIndex& episodes = table->episodic()->episodes();
  // Re-encode the episode with its second slot replaced.
  const auto encode = [&](std::uint32_t second) {
    EpisodeIndex copy(8);
    Episode e = *episodes.find(episode);
    e.slots[1] = second;
    copy.restore(episode, e);
    copy.set_next_id(episodes.next_id());
    MemorySink sink;
    SectionWriter writer(sink);
    StepLog log(8);
    for (std::uint32_t slot = 0; slot < 8; ++slot)
      if (table->storage().occupied(slot)) log.on_store(slot);
    WindowIndexSet windows(WindowContext{&table->storage(), &copy, false, 1.0, 0});
    REQUIRE(write_episode_sections(copy, log, windows, writer).ok());
    return sink.data();
  };
  const auto read = [&](const std::vector<std::byte>& bytes) {
    MemorySource source(bytes);
    SectionReader reader(source, 0);
    EpisodeIndex into(8);
    StepLog log(8);
    WindowIndexSet windows(WindowContext{&table->storage(), &into, false, 1.0, 0});
    return read_episode_sections(reader, table->storage(), EpisodicTable::kMaxOpenEpisodes, into,
                                 log, windows);
  };
  const std::uint32_t first = episodes.find(episode)->slots[0];
  const std::uint32_t second = episodes.find(episode)->slots[1];
  CHECK(read(encode(second)).ok());
  CHECK_THAT(read(encode(first)).error().message, Contains("claimed twice"));
  std::uint32_t free_slot = 0;
  while (table->storage().occupied(free_slot))
    ++free_slot;
  CHECK_THAT(read(encode(free_slot)).error().message, Contains("is free"));
  CHECK_THAT(read(encode(EpisodeIndex::kNoSlot)).error().message, Contains("belong to no episode"));
}

TEST_CASE("window index sections whose members are not exactly the valid starts are rejected") {
  auto table = make_table(episodic_config(8));
  const auto episode = table->episodic()->open_episode(1).value();
  std::vector<std::uint64_t> keys;
  REQUIRE(append(*table, 1, {episode, episode, episode}, {1, 2, 3}, {1.0f, 1.0f, 1.0f}, keys).ok());
  const EpisodeIndex& open = table->episodic()->episodes();
  EpisodeIndex ended(8);  // the same episode, as if it had ended
  Episode copy = *open.find(episode);
  copy.state = EpisodeState::terminated;
  ended.restore(episode, copy);
  StepLog log(8);
  for (std::uint32_t slot = 0; slot < 8; ++slot)
    if (table->storage().occupied(slot)) log.on_store(slot);
  const auto read = [&](const WindowIndexSet& windows) {
    MemorySink sink;
    SectionWriter writer(sink);
    REQUIRE(write_episode_sections(open, log, windows, writer).ok());
    MemorySource source(sink.data());
    SectionReader reader(source, 0);
    EpisodeIndex into(8);
    StepLog into_log(8);
    WindowIndexSet into_windows(WindowContext{&table->storage(), &into, false, 1.0, 0});
    return read_episode_sections(reader, table->storage(), EpisodicTable::kMaxOpenEpisodes, into,
                                 into_log, into_windows);
  };
  WindowIndexSet right(WindowContext{&table->storage(), &open, false, 1.0, 0});
  right.get({2, true, 1, 0});
  CHECK(read(right).ok());
  // Built over the ended copy, the index also lists the last step (a short window).
  WindowIndexSet too_many(WindowContext{&table->storage(), &ended, false, 1.0, 0});
  too_many.get({2, true, 1, 0});
  CHECK_THAT(read(too_many).error().message, Contains("not a valid start"));
  WindowIndexSet too_few(WindowContext{&table->storage(), &open, false, 1.0, 0});
  too_few.add_empty({2, true, 1, 0});
  CHECK_THAT(read(too_few).error().message, Contains("misses valid starts"));
}

}  // namespace
}  // namespace replayd
