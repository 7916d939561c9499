// CompleteEpisodes: the ended episodes whose every step is still stored (positions 0 ..
// length - 1), for drawing whole episodes uniformly. Kept up to date as episodes end and
// steps are removed; each member is keyed by the slot of its first step in a sum tree laid
// out by slot, so draws for a seed do not depend on event order (as WindowIndex).
// Owned by the table. Not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "core/episodes/episode_index.h"
#include "core/rng.h"
#include "core/selectors/prioritized_selector.h"

namespace replayd {

class CompleteEpisodes {
 public:
  explicit CompleteEpisodes(std::uint32_t capacity)
      : selector_(capacity, 0.0), member_(capacity, 0) {}

  static bool is_complete(const Episode& episode) {
    return episode.ended() && episode.first == 0 && episode.stored == episode.length;
  }
  std::uint32_t size() const { return size_; }

  // After `episode` ended. O(log capacity).
  void on_end(const Episode& episode);
  // Before a step of `episode` is removed. O(log capacity).
  void on_remove(const Episode& episode);
  // Rebuilds from every live episode (restore path). O(episodes + capacity).
  void rebuild(const EpisodeIndex& episodes);
  void clear();

  // The slot of a drawn episode's first step, and P = 1 / size(). Precondition: size() > 0.
  Pick sample(Rng& rng) const { return selector_.sample(rng, 0.0); }

 private:
  PrioritizedSelector selector_;
  std::vector<std::uint8_t> member_;
  std::uint32_t size_ = 0;
};

}  // namespace replayd
