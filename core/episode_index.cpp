#include "core/episode_index.h"

namespace replayd {

std::uint64_t EpisodeIndex::open(std::uint64_t writer) {
  const std::uint64_t id = next_id_++;
  Episode episode;
  episode.writer = writer;
  episodes_.emplace(id, std::move(episode));
  ++open_count_;
  return id;
}

const Episode* EpisodeIndex::find(std::uint64_t id) const {
  auto it = episodes_.find(id);
  return it == episodes_.end() ? nullptr : &it->second;
}

std::uint32_t EpisodeIndex::append(std::uint64_t id, std::uint32_t slot) {
  Episode& episode = episodes_.at(id);
  const std::uint32_t position = episode.length++;
  episode.slots.push_back(slot);
  ++episode.stored;
  steps_[slot] = StepRef{id, position};
  return position;
}

void EpisodeIndex::end(std::uint64_t id, EpisodeState how) {
  auto it = episodes_.find(id);
  it->second.state = how;
  --open_count_;
  forget_if_done(it);
}

void EpisodeIndex::discard_empty(std::uint64_t id) {
  if (episodes_.erase(id) != 0) --open_count_;
}

void EpisodeIndex::remove(std::uint32_t slot) {
  const StepRef ref = steps_[slot];
  auto it = episodes_.find(ref.episode);
  Episode& episode = it->second;
  episode.slots[ref.position - episode.first] = kNoSlot;
  --episode.stored;
  while (!episode.slots.empty() && episode.slots.front() == kNoSlot) {
    episode.slots.pop_front();
    ++episode.first;
  }
  forget_if_done(it);
}

void EpisodeIndex::remove_all_steps() {
  for (auto it = episodes_.begin(); it != episodes_.end();) {
    Episode& episode = it->second;
    if (episode.ended()) {
      it = episodes_.erase(it);
      continue;
    }
    episode.slots.clear();
    episode.first = episode.length;
    episode.stored = 0;
    ++it;
  }
}

std::vector<std::uint64_t> EpisodeIndex::open_writers() const {
  std::vector<std::uint64_t> writers;
  for (const auto& [id, episode] : episodes_) {
    if (!episode.ended()) writers.push_back(episode.writer);
  }
  std::sort(writers.begin(), writers.end());
  writers.erase(std::unique(writers.begin(), writers.end()), writers.end());
  return writers;
}

std::vector<std::uint64_t> EpisodeIndex::open_episodes(std::uint64_t writer) const {
  std::vector<std::uint64_t> ids;
  for (const auto& [id, episode] : episodes_) {
    if (!episode.ended() && episode.writer == writer) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

void EpisodeIndex::restore(std::uint64_t id, Episode episode) {
  for (std::uint32_t i = 0; i < episode.slots.size(); ++i) {
    if (episode.slots[i] != kNoSlot) steps_[episode.slots[i]] = StepRef{id, episode.first + i};
  }
  if (!episode.ended()) ++open_count_;
  episodes_[id] = std::move(episode);
}

void EpisodeIndex::forget_if_done(std::unordered_map<std::uint64_t, Episode>::iterator it) {
  if (it->second.ended() && it->second.stored == 0) episodes_.erase(it);
}

}  // namespace replayd
