// Tests for core/nstep.*: window length and terminal flag at and before an episode's end,
// discounts, reward dtypes.
#include "core/nstep.h"

#include <catch2/catch.hpp>

namespace replayd {
namespace {

Episode episode_of(std::uint32_t length, EpisodeState state) {
  Episode episode;
  episode.length = length;
  episode.state = state;
  return episode;
}

TEST_CASE("an n-step window is k steps until the episode's end cuts it short") {
  const Episode open = episode_of(10, EpisodeState::open);
  CHECK(nstep_window(open, 8, 3).steps == 3);  // open: the index guarantees k stored
  const Episode terminated = episode_of(10, EpisodeState::terminated);
  CHECK(nstep_window(terminated, 6, 3).steps == 3);
  CHECK_FALSE(nstep_window(terminated, 6, 3).terminal);
  CHECK(nstep_window(terminated, 7, 3).steps == 3);
  CHECK(nstep_window(terminated, 7, 3).terminal);  // ends exactly at the termination
  CHECK(nstep_window(terminated, 9, 3).steps == 1);
  const Episode truncated = episode_of(10, EpisodeState::truncated);
  CHECK(nstep_window(truncated, 8, 3).steps == 2);
  CHECK_FALSE(nstep_window(truncated, 8, 3).terminal);
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
