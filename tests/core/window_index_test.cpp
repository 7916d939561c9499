// Tests for core/window_index.*: the valid-start rule (stride, backward, forward, short
// windows at an ended episode), incremental upkeep on append, end and removal, and the
// bound on distinct requirements. The table-level reference test covers random streams.
#include "core/episodes/window_index.h"

#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "core/rng.h"
#include "core/schema.h"

namespace replayd {
namespace {

struct Fixture {
  Schema schema = Schema::create({Field{"x", DType::uint8, {}}}).value();
  Storage storage{schema, 16};
  EpisodeIndex episodes{16};
  WindowContext context{&storage, &episodes, false, 1.0, 0};
  WindowIndexSet windows{context};

  std::uint32_t append(std::uint64_t episode) {
    const std::uint32_t slot = storage.acquire();
    episodes.append(episode, slot);
    windows.on_append(slot);
    return slot;
  }
  void remove(std::uint32_t slot) {
    const StepRef ref = episodes.step(slot);
    windows.on_remove(slot, ref, *episodes.find(ref.episode));
    episodes.remove(slot);
    storage.release(slot);
  }
  void end(std::uint64_t episode) {
    episodes.end(episode, EpisodeState::terminated);
    if (const Episode* e = episodes.find(episode)) windows.on_end(*e);
  }
};

TEST_CASE("a forward window is valid once its last step is stored") {
  Fixture f;
  WindowIndex& three = *f.windows.get({3, false, 1, 0});
  const auto e = f.episodes.open(1);
  const auto s0 = f.append(e);
  f.append(e);
  CHECK(three.size() == 0);
  f.append(e);
  CHECK(three.size() == 1);
  CHECK(three.contains(s0));
}

TEST_CASE("short windows become valid when the episode ends, only where allowed") {
  Fixture f;
  WindowIndex& strict = *f.windows.get({3, false, 1, 0});
  WindowIndex& short_ok = *f.windows.get({3, true, 1, 0});
  const auto e = f.episodes.open(1);
  for (int i = 0; i < 4; ++i)
    f.append(e);
  CHECK(short_ok.size() == 2);
  f.end(e);
  CHECK(strict.size() == 2);
  CHECK(short_ok.size() == 4);
}

TEST_CASE("removing a step drops every start whose window holds it, forward and backward") {
  Fixture f;
  WindowIndex& index = *f.windows.get({2, true, 1, 1});
  const auto e = f.episodes.open(1);
  std::vector<std::uint32_t> slots;
  for (int i = 0; i < 6; ++i)
    slots.push_back(f.append(e));
  f.end(e);
  CHECK(index.size() == 6);
  f.remove(slots[3]);  // forward of starts 2, 3; backward of start 4
  CHECK(index.size() == 3);
  CHECK(index.contains(slots[0]));
  CHECK(index.contains(slots[1]));
  CHECK(index.contains(slots[5]));
}

TEST_CASE("strides keep only starts at multiples of the stride") {
  Fixture f;
  const auto e = f.episodes.open(1);
  for (int i = 0; i < 7; ++i)
    f.append(e);
  // Built after the steps: the scan gives what upkeep would have given.
  WindowIndex& index = *f.windows.get({2, false, 3, 0});
  CHECK(index.size() == 2);  // positions 0 and 3; 6 lacks a second step
  f.append(e);
  CHECK(index.size() == 3);
}

TEST_CASE("a window set holds at most kMaxIndexes requirements, dropping the least recently used") {
  Fixture f;
  for (std::uint32_t k = 1; k <= WindowIndexSet::kMaxIndexes; ++k)
    CHECK(f.windows.get({k, true, 1, 0}) != nullptr);
  WindowIndex* first = f.windows.get({1, true, 1, 0});  // an existing one is found (and used)
  CHECK(f.windows.size() == WindowIndexSet::kMaxIndexes);
  CHECK(f.windows.get({1, false, 1, 0}) != nullptr);  // a new one takes k = 2's place
  CHECK(f.windows.size() == WindowIndexSet::kMaxIndexes);
  CHECK(f.windows.get({1, true, 1, 0}) == first);  // k = 1 was used since: still there
  bool k2_found = false;
  for (std::size_t i = 0; i < f.windows.size(); ++i)
    k2_found = k2_found || f.windows.at(i).spec() == WindowSpec{2, true, 1, 0};
  CHECK_FALSE(k2_found);
  f.windows.clear();
  CHECK(f.windows.size() == 0);
}

}  // namespace
}  // namespace replayd

namespace replayd {
namespace {

// The valid-start rule of window_index.h, checked step by step (the reference).
bool valid_by_rule(const WindowSpec& spec, const WindowContext& context, std::uint32_t slot) {
  if (context.max_times_sampled != 0 &&
      context.storage->times_sampled(slot) >= context.max_times_sampled) {
    return false;
  }
  const StepRef ref = context.episodes->step(slot);
  const Episode& episode = *context.episodes->find(ref.episode);
  const std::uint64_t p = ref.position;
  if (p % spec.stride != 0) return false;
  if (context.next_of && episode.ended() && p + 1 == episode.length) return false;
  if (!context.pad_history && p < spec.backward) return false;
  std::uint64_t end = p + spec.forward;
  if (end > episode.length) {
    if (!spec.allow_short || !episode.ended()) return false;
    end = episode.length;
  }
  for (std::uint64_t q = p >= spec.backward ? p - spec.backward : 0; q < end; ++q) {
    if (EpisodeIndex::slot_at(episode, q) == EpisodeIndex::kNoSlot) return false;
  }
  return true;
}

// A random stream of appends, episode ends and removals anywhere (gaps inside episodes,
// evicted fronts), then an index built from scratch for each requirement, and one kept up to
// date through the stream: their members, and is_valid(), are exactly the stored steps that
// the rule accepts.
TEST_CASE("an index built from the table's steps holds exactly the valid starts") {
  const Schema schema = Schema::create({Field{"x", DType::uint8, {}}}).value();
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed);
    Storage storage{schema, 64};
    EpisodeIndex episodes{64};
    std::vector<std::uint64_t> open;
    const WindowContext live_context{&storage, &episodes, false, 1.0, 0, false, true};
    std::vector<std::unique_ptr<WindowIndex>> live;  // kept up to date through the stream
    for (const WindowSpec spec :
         {WindowSpec{3, false, 1, 0}, WindowSpec{2, true, 1, 2}, WindowSpec{4, false, 2, 3}})
      live.push_back(std::make_unique<WindowIndex>(spec, live_context));
    for (int op = 0; op < 400; ++op) {
      const std::uint64_t dice = rng.uniform_below(10);
      if (open.size() < 3 && (open.empty() || dice == 0)) {
        open.push_back(episodes.open(1));
      } else if (dice == 1 && episodes.find(open.front())->length > 0) {
        const std::uint64_t id = open.front();
        episodes.end(id, rng.uniform_below(2) ? EpisodeState::terminated : EpisodeState::truncated);
        if (const Episode* ended = episodes.find(id))
          for (auto& index : live)
            index->on_end(*ended);
        open.erase(open.begin());
      } else if (storage.full() || dice == 2) {
        if (storage.size() == 0) continue;
        std::uint32_t slot = static_cast<std::uint32_t>(rng.uniform_below(64));
        while (!storage.occupied(slot))
          slot = (slot + 1) % 64;
        const StepRef ref = episodes.step(slot);
        for (auto& index : live)
          index->on_remove(slot, ref, *episodes.find(ref.episode));
        episodes.remove(slot);
        storage.release(slot);
      } else {
        const std::uint32_t slot = storage.acquire();
        episodes.append(open[rng.uniform_below(open.size())], slot);
        for (auto& index : live)
          index->on_append(slot);
      }
    }
    for (const auto& index : live) {
      std::uint32_t valid = 0;
      for (std::uint32_t slot = 0; slot < 64; ++slot) {
        if (!storage.occupied(slot)) continue;
        INFO("seed " << seed << " slot " << slot << " forward " << index->spec().forward);
        const bool expected = valid_by_rule(index->spec(), live_context, slot);
        REQUIRE(index->contains(slot) == expected);
        valid += expected ? 1 : 0;
      }
      CHECK(index->size() == valid);
    }
    for (const bool next_of : {false, true}) {
      for (const bool pad_history : {true, false}) {
        const WindowContext context{&storage, &episodes, false, 1.0, 0, next_of, pad_history};
        for (const WindowSpec spec :
             {WindowSpec{1, false, 1, 0}, WindowSpec{3, false, 1, 0}, WindowSpec{3, true, 1, 0},
              WindowSpec{2, true, 2, 0}, WindowSpec{4, false, 1, 3}, WindowSpec{1, true, 3, 5}}) {
          const WindowIndex index(spec, context);
          std::uint32_t valid = 0;
          for (std::uint32_t slot = 0; slot < 64; ++slot) {
            if (!storage.occupied(slot)) continue;
            INFO("seed " << seed << " slot " << slot << " forward " << spec.forward);
            const bool expected = valid_by_rule(spec, context, slot);
            REQUIRE(index.is_valid(slot) == expected);
            REQUIRE(index.contains(slot) == expected);
            valid += expected ? 1 : 0;
          }
          CHECK(index.size() == valid);
        }
      }
    }
  }
}

}  // namespace
}  // namespace replayd
