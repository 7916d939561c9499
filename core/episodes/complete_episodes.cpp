#include "core/episodes/complete_episodes.h"

#include <algorithm>

namespace replayd {

void CompleteEpisodes::on_end(const Episode& episode) {
  if (!is_complete(episode)) return;
  const std::uint32_t slot = episode.slots.front();
  selector_.insert(slot, 1.0);
  member_[slot] = 1;
  ++size_;
}

void CompleteEpisodes::on_remove(const Episode& episode) {
  if (!is_complete(episode)) return;
  const std::uint32_t slot = episode.slots.front();
  selector_.remove(slot);
  member_[slot] = 0;
  --size_;
}

void CompleteEpisodes::rebuild(const EpisodeIndex& episodes) {
  clear();
  episodes.for_each([&](std::uint64_t, const Episode& episode) { on_end(episode); });
}

void CompleteEpisodes::clear() {
  selector_.clear();
  std::fill(member_.begin(), member_.end(), 0);
  size_ = 0;
}

}  // namespace replayd
