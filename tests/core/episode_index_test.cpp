// Tests for core/episode_index.*: positions, slots by position, removal of first, middle
// and last steps, forgetting ended episodes, writers' open episodes, reset.
#include "core/episodes/episode_index.h"

#include <catch2/catch.hpp>
#include <vector>

#include "core/rng.h"

namespace replayd {
namespace {

TEST_CASE("steps get consecutive positions per episode, interleaved episodes apart") {
  EpisodeIndex index(8);
  const auto a = index.open(1);
  const auto b = index.open(1);
  CHECK(a != b);
  CHECK(index.append(a, 5) == 0);
  CHECK(index.append(b, 2) == 0);
  CHECK(index.append(a, 7) == 1);
  CHECK(index.step(7).episode == a);
  CHECK(index.step(7).position == 1);
  CHECK(EpisodeIndex::slot_at(*index.find(a), 1) == 7);
  CHECK(EpisodeIndex::slot_at(*index.find(a), 2) == EpisodeIndex::kNoSlot);
  CHECK(index.open_episodes(1) == std::vector<std::uint64_t>{a, b});
}

TEST_CASE("removing an episode's first steps moves its first stored position") {
  EpisodeIndex index(8);
  const auto a = index.open(1);
  for (std::uint32_t slot = 0; slot < 4; ++slot)
    index.append(a, slot);
  index.remove(1);  // a hole in the middle
  CHECK(index.find(a)->first == 0);
  CHECK(EpisodeIndex::slot_at(*index.find(a), 1) == EpisodeIndex::kNoSlot);
  index.remove(0);  // the first step: the hole behind it goes too
  CHECK(index.find(a)->first == 2);
  CHECK(index.find(a)->stored == 2);
  CHECK(EpisodeIndex::slot_at(*index.find(a), 2) == 2);
  CHECK(EpisodeIndex::slot_at(*index.find(a), 0) == EpisodeIndex::kNoSlot);
}

TEST_CASE("an ended episode is forgotten with its last stored step, an open one is kept") {
  EpisodeIndex index(8);
  const auto ended = index.open(1);
  const auto open = index.open(1);
  index.append(ended, 0);
  index.append(open, 1);
  index.end(ended, EpisodeState::terminated);
  CHECK(index.find(ended)->state == EpisodeState::terminated);
  index.remove(0);
  index.remove(1);
  CHECK(index.find(ended) == nullptr);
  REQUIRE(index.find(open) != nullptr);
  CHECK(index.find(open)->length == 1);
  CHECK(index.find(open)->first == 1);
  CHECK(index.append(open, 3) == 1);  // continues with its next position
  CHECK(index.open_count() == 1);
}

TEST_CASE("removing every step keeps open episodes' positions and forgets ended ones") {
  EpisodeIndex index(4);
  const auto ended = index.open(1);
  const auto open = index.open(2);
  index.append(ended, 0);
  index.append(open, 1);
  index.append(open, 2);
  index.end(ended, EpisodeState::truncated);
  index.remove_all_steps();
  CHECK(index.find(ended) == nullptr);
  CHECK(index.find(open)->stored == 0);
  CHECK(index.append(open, 0) == 2);
  index.discard_empty(index.open(2));
  CHECK(index.open_episodes(2) == std::vector<std::uint64_t>{open});
}

// What following(slot) must be, from the episode's slots, length and state alone.
std::uint32_t expected_following(const EpisodeIndex& index, std::uint32_t slot) {
  const StepRef ref = index.step(slot);
  const Episode& episode = *index.find(ref.episode);
  if (ref.position + 1 < episode.length) {
    const std::uint32_t next = EpisodeIndex::slot_at(episode, ref.position + 1);
    return next != EpisodeIndex::kNoSlot ? next : EpisodeIndex::kNextGone;
  }
  if (episode.state == EpisodeState::terminated) return EpisodeIndex::kTerminatesHere;
  if (episode.state == EpisodeState::truncated) return EpisodeIndex::kTruncatedHere;
  return EpisodeIndex::kLatest;
}

TEST_CASE("following() names the next stored step of the episode, or how the episode goes on") {
  constexpr std::uint32_t kSlots = 24;
  EpisodeIndex index(kSlots);
  Rng rng(7);
  std::vector<bool> stored(kSlots, false);
  std::vector<std::uint64_t> open;
  for (int op = 0; op < 5000; ++op) {
    const auto choice = rng.uniform_below(10);
    if (open.size() < 3 && choice == 0) {
      open.push_back(index.open(1));
    } else if (!open.empty() && choice == 1) {
      const auto at = rng.uniform_below(open.size());
      if (index.find(open[at])->length == 0) continue;
      index.end(open[at],
                rng.uniform_below(2) == 0 ? EpisodeState::terminated : EpisodeState::truncated);
      open.erase(open.begin() + static_cast<std::ptrdiff_t>(at));
    } else if (choice < 5) {
      const auto slot = static_cast<std::uint32_t>(rng.uniform_below(kSlots));
      if (!stored[slot]) continue;
      index.remove(slot);
      stored[slot] = false;
    } else if (!open.empty()) {
      const auto slot = static_cast<std::uint32_t>(rng.uniform_below(kSlots));
      if (stored[slot]) continue;
      index.append(open[rng.uniform_below(open.size())], slot);
      stored[slot] = true;
    }
    for (std::uint32_t slot = 0; slot < kSlots; ++slot) {
      if (stored[slot]) REQUIRE(index.following(slot) == expected_following(index, slot));
    }
  }
  // A restored copy links its slots the same way.
  EpisodeIndex copy(kSlots);
  index.for_each([&](std::uint64_t id, const Episode& episode) { copy.restore(id, episode); });
  for (std::uint32_t slot = 0; slot < kSlots; ++slot) {
    if (stored[slot]) CHECK(copy.following(slot) == index.following(slot));
  }
}

}  // namespace
}  // namespace replayd
