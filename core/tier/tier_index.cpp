#include "core/tier/tier_index.h"

#include <algorithm>
#include <cassert>

namespace replayd {

TierIndex::TierIndex(std::uint32_t capacity, std::uint64_t ram_rows)
    : ram_rows_(ram_rows), state_(capacity, State::empty), locations_(capacity) {}

void TierIndex::on_store(std::uint32_t slot, std::uint64_t key) {
  assert(state_[slot] == State::empty);
  state_[slot] = State::hot;
  ++hot_rows_;
  hot_order_.push_back(SpillRow{slot, key});
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
    case State::cold: {
      --cold_rows_;
      const auto live = live_.find(locations_[slot].segment);
      if (--live->second == 0) {
        live_.erase(live);
        ++segments_emptied_;
      }
      break;
    }
  }
  state_[slot] = State::empty;
}

void TierIndex::on_spilled(std::uint32_t slot, const ColdLocation& where) {
  assert(state_[slot] == State::spilling);
  --spilling_rows_;
  --hot_rows_;
  ++cold_rows_;
  state_[slot] = State::cold;
  locations_[slot] = where;
  ++live_[where.segment];
}

void TierIndex::clear() {
  std::fill(state_.begin(), state_.end(), State::empty);
  hot_rows_ = spilling_rows_ = cold_rows_ = 0;
  hot_order_.clear();
  live_.clear();
  ++segments_emptied_;
}

void TierIndex::restore_cold(std::uint32_t slot, const ColdLocation& where) {
  assert(state_[slot] == State::empty);
  ++cold_rows_;
  state_[slot] = State::cold;
  locations_[slot] = where;
  ++live_[where.segment];
}

void TierIndex::on_spill_failed(const SpillRow& row) {
  if (state_[row.slot] != State::spilling) return;  // removed meanwhile
  state_[row.slot] = State::hot;
  --spilling_rows_;
  hot_order_.push_front(row);
}

std::uint64_t TierIndex::live_rows(std::uint32_t segment) const {
  const auto live = live_.find(segment);
  return live == live_.end() ? 0 : live->second;
}

}  // namespace replayd
