// Tests for core/complete_episodes.*: an episode counts as complete from its end until one
// of its steps is removed; open episodes and ones missing their first steps never count.
#include "core/episodes/complete_episodes.h"

#include <catch2/catch.hpp>

namespace replayd {
namespace {

TEST_CASE("only ended episodes with every step stored can be drawn whole") {
  EpisodeIndex episodes(8);
  CompleteEpisodes complete(8);
  const auto a = episodes.open(1);
  const auto b = episodes.open(1);
  episodes.append(a, 0);
  episodes.append(a, 1);
  episodes.append(b, 2);
  episodes.append(b, 3);
  CHECK(complete.size() == 0);  // both open
  episodes.end(a, EpisodeState::terminated);
  complete.on_end(*episodes.find(a));
  CHECK(complete.size() == 1);
  Rng rng(1);
  const Pick pick = complete.sample(rng);
  CHECK(episodes.step(pick.slot).episode == a);
  CHECK(pick.probability == 1.0);
  // b loses its first step before it ends: never complete.
  complete.on_remove(*episodes.find(b));
  episodes.remove(2);
  episodes.end(b, EpisodeState::truncated);
  complete.on_end(*episodes.find(b));
  CHECK(complete.size() == 1);
  // a loses a step: no longer complete.
  complete.on_remove(*episodes.find(a));
  episodes.remove(1);
  CHECK(complete.size() == 0);
  CompleteEpisodes rebuilt(8);
  rebuilt.rebuild(episodes);
  CHECK(rebuilt.size() == 0);
}

}  // namespace
}  // namespace replayd
