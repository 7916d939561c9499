// EpisodeIndex: which episode each stored step belongs to and where, and what is known of
// each episode (its writer, open or how it ended, its length, the slots of its stored steps).
// The table owns it beside Storage and tells it of every step stored and removed.
// Not thread-safe; the table's owner thread only.
//
// Invariants: a live episode's `slots` covers positions [first, length) exactly (slot or
// kNoSlot for a step no longer stored); slots.front() is stored unless slots is empty (then
// first == length); `stored` counts the stored entries; an ended episode with no stored
// step is forgotten. Episode ids start at 1 and are never reused (0 means "none").
// following(s) of a stored slot s is the slot of the next step of its episode while that
// step is stored, else one of the markers below: the hot n-step walk reads only it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/episodes/slot_queue.h"

namespace replayd {

enum class EpisodeState : std::uint8_t { open = 0, terminated = 1, truncated = 2 };

struct Episode {
  std::uint64_t writer = 0;
  EpisodeState state = EpisodeState::open;
  std::uint32_t length = 0;  // steps appended so far (stored or not)
  std::uint32_t first = 0;   // position of slots.front()
  std::uint32_t stored = 0;  // stored steps
  // Every position in [stored_from, length) is stored (first <= stored_from <= length): a
  // window from there on needs no step-by-step check.
  std::uint32_t stored_from = 0;
  SlotQueue slots;

  bool ended() const { return state != EpisodeState::open; }
};

// Where a stored step sits: its episode and its position in it (0 = the episode's first).
struct StepRef {
  std::uint64_t episode = 0;
  std::uint32_t position = 0;
};

class EpisodeIndex {
 public:
  static constexpr std::uint32_t kNoSlot = UINT32_MAX;
  static constexpr std::uint32_t kMaxEpisodeLength = UINT32_MAX - 1;  // steps
  // What following(slot) holds when the next step is not a stored slot (capacities are at
  // most 2^31, so no slot takes these values).
  static constexpr std::uint32_t kLatest = UINT32_MAX;  // the latest step of an open episode
  static constexpr std::uint32_t kTerminatesHere = UINT32_MAX - 1;  // the last step; terminated
  static constexpr std::uint32_t kTruncatedHere = UINT32_MAX - 2;   // the last step; truncated
  static constexpr std::uint32_t kNextGone = UINT32_MAX - 3;  // a next step exists, not stored

  // history_positions: steps at positions below it are counted by history_steps().
  explicit EpisodeIndex(std::uint32_t capacity, std::uint32_t history_positions = 0)
      : steps_(capacity), following_(capacity), history_positions_(history_positions) {}

  // Opens a new, empty episode of `writer` and returns its id. O(1).
  std::uint64_t open(std::uint64_t writer);
  // The live episode `id`, or nullptr (never opened, or ended and wholly removed).
  // The pointer stays valid until the next non-const call.
  const Episode* find(std::uint64_t id) const;
  // Records that the stored `slot` holds the next step of the open episode `id`; returns its
  // position. Precondition: the episode is open and shorter than kMaxEpisodeLength. O(1).
  std::uint32_t append(std::uint64_t id, std::uint32_t slot);
  // Ends the open episode `id`. Precondition: open, length >= 1. An episode with no step
  // stored any more is forgotten. O(1).
  void end(std::uint64_t id, EpisodeState how);
  // Forgets an open episode that has no steps (a writer that leaves before appending). O(1).
  void discard_empty(std::uint64_t id);
  // Records that the step in `slot` is no longer stored. Amortized O(1).
  void remove(std::uint32_t slot);
  // Every step is gone (the table was reset): ended episodes are forgotten, open ones keep
  // their length and continue with their next position. O(episodes + capacity).
  void remove_all_steps();

  // The step in the stored `slot`.
  StepRef step(std::uint32_t slot) const { return steps_[slot]; }
  // The slot of the next step of the stored `slot`'s episode, or a marker (kLatest, ...).
  // O(1), one read of a per-slot array: consecutive steps of an episode sit close together in
  // it, so walking a window costs about one cache miss.
  std::uint32_t following(std::uint32_t slot) const { return following_[slot]; }
  // Asks the CPU to fetch following(slot) ahead of a walk (a hint; no effect on results).
  void prefetch_following(std::uint32_t slot) const { __builtin_prefetch(&following_[slot]); }
  // The slot of `episode`'s step at `position`, or kNoSlot when that step is not stored.
  static std::uint32_t slot_at(const Episode& episode, std::uint64_t position) {
    if (position < episode.first || position >= episode.length) return kNoSlot;
    return episode.slots[static_cast<std::size_t>(position - episode.first)];
  }
  // Ids of `writer`'s open episodes, ascending. O(episodes).
  std::vector<std::uint64_t> open_episodes(std::uint64_t writer) const;
  // Writers of open episodes, ascending, each once. O(episodes log episodes).
  std::vector<std::uint64_t> open_writers() const;
  std::uint32_t capacity() const { return static_cast<std::uint32_t>(steps_.size()); }
  std::size_t live_episodes() const { return episodes_.size(); }
  std::size_t open_count() const { return open_count_; }
  // Open episodes of `writer` (a per-connection quota counts them). O(1).
  std::size_t open_count_of(std::uint64_t writer) const {
    const auto it = open_by_writer_.find(writer);
    return it == open_by_writer_.end() ? 0 : it->second;
  }
  std::uint64_t next_id() const { return next_id_; }
  // Stored steps at positions below history_positions in their episode. O(1).
  std::uint64_t history_steps() const { return history_steps_; }

  // Snapshot support: visits every live episode in ascending id order.
  template <typename Visit>
  void for_each(Visit visit) const;
  // Visits every live episode, in no particular order. O(episodes).
  template <typename Visit>
  void for_each_unordered(Visit visit) const {
    for (const auto& [id, episode] : episodes_)
      visit(id, episode);
  }
  // Restore path: installs an episode exactly (its slots must name occupied slots that no
  // other episode claims; the caller validates) and sets the steps of its slots.
  void restore(std::uint64_t id, Episode episode);
  void set_next_id(std::uint64_t id) { next_id_ = id; }

 private:
  void forget_if_done(std::unordered_map<std::uint64_t, Episode>::iterator it);
  // One open episode of `writer` ended or was discarded.
  void closed_by(std::uint64_t writer);

  // Sets following() of the stored step before position `position` of `episode`, if any.
  void link_previous(const Episode& episode, std::uint32_t position, std::uint32_t value);

  std::vector<StepRef> steps_;            // per slot; meaningful only for occupied slots
  std::vector<std::uint32_t> following_;  // per slot; meaningful only for occupied slots
  std::unordered_map<std::uint64_t, Episode> episodes_;
  std::uint64_t next_id_ = 1;
  std::size_t open_count_ = 0;
  std::unordered_map<std::uint64_t, std::size_t> open_by_writer_;  // writers with open ones
  std::uint32_t history_positions_ = 0;
  std::uint64_t history_steps_ = 0;
};

template <typename Visit>
void EpisodeIndex::for_each(Visit visit) const {
  std::vector<std::uint64_t> ids;
  ids.reserve(episodes_.size());
  for (const auto& [id, episode] : episodes_)
    ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (auto id : ids)
    visit(id, episodes_.at(id));
}

}  // namespace replayd
