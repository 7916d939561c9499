// Tests for core/nstep.*: window length and terminal flag at and before an episode's end,
// discounts, reward dtypes.
#include "core/episodes/nstep.h"

#include <catch2/catch.hpp>
#include <vector>

namespace replayd {
namespace {

// Appends `length` steps of one episode to `index` at slots first_slot, +stride, ...
std::uint64_t append_episode(EpisodeIndex& index, std::uint32_t length, std::uint32_t first_slot,
                             std::uint32_t stride) {
  const auto id = index.open(1);
  for (std::uint32_t i = 0; i < length; ++i)
    index.append(id, first_slot + i * stride);
  return id;
}

std::vector<std::uint32_t> walked(const EpisodeIndex& index, std::uint32_t start, std::uint32_t k,
                                  NStepWindow* window) {
  std::vector<std::uint32_t> slots;
  *window = walk_nstep(index, start, k, [&](std::uint32_t slot) { slots.push_back(slot); });
  return slots;
}

TEST_CASE("an n-step window is k steps of its episode until the episode's end cuts it short") {
  EpisodeIndex index(64);
  // Two interleaved episodes of 10 steps: slots 0, 2, ..., 18 and 1, 3, ..., 19.
  const auto terminated = append_episode(index, 10, 0, 2);
  const auto truncated = append_episode(index, 10, 1, 2);
  NStepWindow window;
  // Both still open: k steps (the index guarantees they are stored).
  CHECK(walked(index, 14, 3, &window) == std::vector<std::uint32_t>{14, 16, 18});
  CHECK(window.steps == 3);
  CHECK_FALSE(window.terminal);
  index.end(terminated, EpisodeState::terminated);
  index.end(truncated, EpisodeState::truncated);
  CHECK(walked(index, 12, 3, &window) == std::vector<std::uint32_t>{12, 14, 16});
  CHECK_FALSE(window.terminal);
  CHECK(walked(index, 14, 3, &window) == std::vector<std::uint32_t>{14, 16, 18});
  CHECK(window.terminal);  // ends exactly at the termination
  CHECK(walked(index, 18, 3, &window) == std::vector<std::uint32_t>{18});
  CHECK(window.terminal);
  CHECK(walked(index, 17, 3, &window) == std::vector<std::uint32_t>{17, 19});
  CHECK(window.steps == 2);
  CHECK_FALSE(window.terminal);  // truncated: bootstrap
}

TEST_CASE("a window stops before a step that is no longer stored") {
  EpisodeIndex index(16);
  const auto id = append_episode(index, 6, 0, 1);
  index.remove(3);  // a hole in the middle: windows over it are never drawn, but stay bounded
  NStepWindow window;
  CHECK(walked(index, 1, 5, &window) == std::vector<std::uint32_t>{1, 2});
  CHECK_FALSE(window.terminal);
  index.append(id, 9);
  index.end(id, EpisodeState::terminated);
  CHECK(walked(index, 4, 5, &window) == std::vector<std::uint32_t>{4, 5, 9});
  CHECK(window.terminal);
}

TEST_CASE("the discount is gamma^h, 0 when the window reaches a termination") {
  CHECK(nstep_discount({3, false}, 0.5) == 0.125);
  CHECK(nstep_discount({3, true}, 0.5) == 0.0);
  CHECK(nstep_discount({1, false}, 1.0) == 1.0);
}

TEST_CASE("rewards read and write as float32 and float64") {
  std::byte cell[8];
  write_reward(cell, DType::float32, 0.1);
  CHECK(read_reward(cell, DType::float32) == static_cast<double>(0.1f));
  write_reward(cell, DType::float64, 0.1);
  CHECK(read_reward(cell, DType::float64) == 0.1);
}

}  // namespace
}  // namespace replayd
