#include "core/tier/tier_index.h"

#include <algorithm>
#include <cassert>
#include <unordered_set>

namespace replayd {

TierIndex::TierIndex(std::uint32_t capacity, std::uint64_t ram_rows)
    : ram_rows_(ram_rows), state_(capacity, State::empty), locations_(capacity) {}

void TierIndex::on_store(std::uint32_t slot, std::uint64_t key) {
  assert(state_[slot] == State::empty);
  state_[slot] = State::hot;
  ++hot_rows_;
  hot_order_.push_back(SpillRow{slot, key});
  if (hot_order_.size() > 2 * hot_rows_ + kHotOrderSlack) drop_removed_from_hot_order();
}

void TierIndex::drop_removed_from_hot_order() {
  // From the newest entry back: a slot's newest entry is its row's when it is hot; an
  // older entry of the same slot is a removed row's, as is any entry of a slot not hot.
  // The slots seen are a set of the entries' size, not a bitmap of the capacity: a budget of
  // a few hundred hot rows in a table of 10^8 slots runs this every few hundred rows stored.
  std::unordered_set<std::uint32_t> seen;
  seen.reserve(hot_rows_);
  std::deque<SpillRow> kept;
  for (auto entry = hot_order_.rbegin(); entry != hot_order_.rend(); ++entry) {
    if (state_[entry->slot] != State::hot || !seen.insert(entry->slot).second) continue;
    kept.push_front(*entry);
  }
  hot_order_ = std::move(kept);
}

void TierIndex::on_release(std::uint32_t slot) {
  switch (state_[slot]) {
    case State::empty:
      return;
    case State::spilling:
      --spilling_rows_;
      [[fallthrough]];
    case State::hot:
      --hot_rows_;  // its entry in hot_order_ is skipped when reached
      break;
    case State::cold:
      --cold_rows_;
      ++cold_released_;
      leave_segment(slot);
      break;
  }
  state_[slot] = State::empty;
}

void TierIndex::on_spilled(std::uint32_t slot, const ColdLocation& where) {
  assert(state_[slot] == State::spilling);
  --spilling_rows_;
  --hot_rows_;
  ++cold_rows_;
  state_[slot] = State::cold;
  enter_segment(slot, where);
}

void TierIndex::leave_segment(std::uint32_t slot) {
  const std::uint32_t segment = locations_[slot].segment;
  const auto live = live_.find(segment);
  live->second.bytes -= locations_[slot].bytes;
  if (--live->second.rows == 0) {
    live_.erase(live);
    slots_of_.erase(segment);
    ++segments_emptied_;
  }
}

void TierIndex::enter_segment(std::uint32_t slot, const ColdLocation& where) {
  locations_[slot] = where;
  Live& live = live_[where.segment];
  ++live.rows;
  live.bytes += where.bytes;
  slots_of_[where.segment].push_back(slot);
}

std::vector<MoveRow> TierIndex::choose_moves(std::uint32_t segment, std::uint64_t most_rows,
                                             std::uint64_t most_bytes) {
  std::vector<MoveRow> chosen;
  const auto listed = slots_of_.find(segment);
  if (listed == slots_of_.end()) return chosen;
  std::vector<std::uint32_t>& slots = listed->second;
  std::uint64_t bytes = 0;
  while (!slots.empty() && chosen.size() < most_rows && (chosen.empty() || bytes < most_bytes)) {
    const std::uint32_t slot = slots.back();
    slots.pop_back();
    if (state_[slot] != State::cold || locations_[slot].segment != segment) continue;  // left
    chosen.push_back(MoveRow{slot, locations_[slot]});
    bytes += locations_[slot].bytes;
  }
  return chosen;
}

void TierIndex::on_moved(const MoveRow& row, const ColdLocation& to) {
  const ColdLocation& now = locations_[row.slot];
  if (state_[row.slot] != State::cold || now.segment != row.from.segment ||
      now.offset != row.from.offset) {
    return;  // removed (or removed and written out again) since it was chosen
  }
  leave_segment(row.slot);
  enter_segment(row.slot, to);
}

void TierIndex::on_move_failed(std::span<const MoveRow> rows) {
  for (const MoveRow& row : rows) {
    const ColdLocation& now = locations_[row.slot];
    if (state_[row.slot] == State::cold && now.segment == row.from.segment &&
        now.offset == row.from.offset) {
      slots_of_[row.from.segment].push_back(row.slot);
    }
  }
}

void TierIndex::clear() {
  std::fill(state_.begin(), state_.end(), State::empty);
  hot_rows_ = spilling_rows_ = cold_rows_ = 0;
  hot_order_.clear();
  live_.clear();
  slots_of_.clear();
  ++segments_emptied_;
}

void TierIndex::restore_cold(std::uint32_t slot, const ColdLocation& where) {
  assert(state_[slot] == State::empty);
  ++cold_rows_;
  state_[slot] = State::cold;
  enter_segment(slot, where);
}

void TierIndex::on_spill_failed(const SpillRow& row) {
  if (state_[row.slot] != State::spilling) return;  // removed meanwhile
  state_[row.slot] = State::hot;
  --spilling_rows_;
  hot_order_.push_front(row);
}

std::uint64_t TierIndex::live_rows(std::uint32_t segment) const {
  const auto live = live_.find(segment);
  return live == live_.end() ? 0 : live->second.rows;
}

std::uint64_t TierIndex::live_bytes(std::uint32_t segment) const {
  const auto live = live_.find(segment);
  return live == live_.end() ? 0 : live->second.bytes;
}

}  // namespace replayd
