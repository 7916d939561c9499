#include "core/episodes/episode_index.h"

#include <algorithm>

namespace replayd {

std::uint64_t EpisodeIndex::open(std::uint64_t writer) {
  const std::uint64_t id = next_id_++;
  Episode episode;
  episode.writer = writer;
  episodes_.emplace(id, std::move(episode));
  ++open_count_;
  ++open_by_writer_[writer];
  return id;
}

const Episode* EpisodeIndex::find(std::uint64_t id) const {
  auto it = episodes_.find(id);
  return it == episodes_.end() ? nullptr : &it->second;
}

std::uint32_t EpisodeIndex::append(std::uint64_t id, std::uint32_t slot) {
  Episode& episode = episodes_.at(id);
  const std::uint32_t position = episode.length;
  link_previous(episode, position, slot);
  ++episode.length;
  episode.slots.push_back(slot);
  ++episode.stored;
  if (position < history_positions_) ++history_steps_;
  steps_[slot] = StepRef{id, position};
  following_[slot] = kLatest;
  return position;
}

void EpisodeIndex::end(std::uint64_t id, EpisodeState how) {
  auto it = episodes_.find(id);
  it->second.state = how;
  link_previous(it->second, it->second.length,
                how == EpisodeState::terminated ? kTerminatesHere : kTruncatedHere);
  --open_count_;
  closed_by(it->second.writer);
  forget_if_done(it);
}

void EpisodeIndex::discard_empty(std::uint64_t id) {
  const auto it = episodes_.find(id);
  if (it == episodes_.end()) return;
  closed_by(it->second.writer);
  episodes_.erase(it);
  --open_count_;
}

void EpisodeIndex::closed_by(std::uint64_t writer) {
  const auto it = open_by_writer_.find(writer);
  if (it != open_by_writer_.end() && --it->second == 0) open_by_writer_.erase(it);
}

void EpisodeIndex::remove(std::uint32_t slot) {
  const StepRef ref = steps_[slot];
  auto it = episodes_.find(ref.episode);
  Episode& episode = it->second;
  link_previous(episode, ref.position, kNextGone);
  episode.slots[ref.position - episode.first] = kNoSlot;
  episode.stored_from = std::max(episode.stored_from, ref.position + 1);
  --episode.stored;
  if (ref.position < history_positions_) --history_steps_;
  while (!episode.slots.empty() && episode.slots.front() == kNoSlot) {
    episode.slots.pop_front();
    ++episode.first;
  }
  forget_if_done(it);
}

void EpisodeIndex::remove_all_steps() {
  history_steps_ = 0;
  for (auto it = episodes_.begin(); it != episodes_.end();) {
    Episode& episode = it->second;
    if (episode.ended()) {
      it = episodes_.erase(it);
      continue;
    }
    episode.slots.clear();
    episode.first = episode.length;
    episode.stored_from = episode.length;
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
  std::uint32_t after_last = kLatest;
  if (episode.state == EpisodeState::terminated) after_last = kTerminatesHere;
  if (episode.state == EpisodeState::truncated) after_last = kTruncatedHere;
  episode.stored_from = episode.first;
  for (std::uint32_t i = 0; i < episode.slots.size(); ++i) {
    const std::uint32_t slot = episode.slots[i];
    if (slot == kNoSlot) {
      episode.stored_from = episode.first + i + 1;
      continue;
    }
    steps_[slot] = StepRef{id, episode.first + i};
    if (episode.first + i < history_positions_) ++history_steps_;
    if (i + 1 == episode.slots.size()) {
      following_[slot] = after_last;
    } else {
      following_[slot] = episode.slots[i + 1] != kNoSlot ? episode.slots[i + 1] : kNextGone;
    }
  }
  if (!episode.ended()) {
    ++open_count_;
    ++open_by_writer_[episode.writer];
  }
  episodes_[id] = std::move(episode);
}

void EpisodeIndex::link_previous(const Episode& episode, std::uint32_t position,
                                 std::uint32_t value) {
  const std::uint32_t previous = position == 0 ? kNoSlot : slot_at(episode, position - 1);
  if (previous != kNoSlot) following_[previous] = value;
}

void EpisodeIndex::forget_if_done(std::unordered_map<std::uint64_t, Episode>::iterator it) {
  if (it->second.ended() && it->second.stored == 0) episodes_.erase(it);
}

}  // namespace replayd
