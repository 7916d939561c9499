// TierIndex: which rows of a table with a file tier are hot (their fixed-size cells in the
// column block, in RAM) and which are cold (written out to a segment file, their cells'
// pages given back), and where each cold row lies. Rows go cold in the order they were
// stored (oldest hot row first) once more than ram_rows are hot. Per-segment live counts
// say when a segment file holds no live row any more and may be deleted; per-segment live
// bytes and a list of the slots written to each segment let a table whose remover leaves
// segments half live move their live records to the open segment (compaction), after
// which the emptied segment is deleted like any other.
// Invariants: hot_rows() counts stored rows that are not cold (spilling ones included);
// a segment has a live count exactly while some cold row lies in it; every cold row's slot
// is in its segment's slot list (which may also hold slots that left it).
// Threading: not thread-safe; the owner of its Table only. Never touches a file: the
// service writes and reads the segments (service/tier/).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <vector>

namespace replayd {

// Where a cold row's record lies: `bytes` bytes at `offset` of segment `segment`; `raw`: its
// payload is the row's bytes as stored (compression would not have saved enough).
struct ColdLocation {
  std::uint32_t segment = 0;
  std::uint32_t bytes : 31 = 0;
  std::uint32_t raw : 1 = 0;
  std::uint64_t offset = 0;
};

// One row to write out: its slot and the key it held when chosen (a row whose slot holds
// another key by the time the write completes was removed meanwhile: it stays removed).
struct SpillRow {
  std::uint32_t slot = 0;
  std::uint64_t key = 0;
};

// One cold row to move to another segment (compaction): its slot and where it lies now.
struct MoveRow {
  std::uint32_t slot = 0;
  ColdLocation from;
};

class TierIndex {
 public:
  // capacity: the table's slots; ram_rows >= 1: how many rows stay hot.
  TierIndex(std::uint32_t capacity, std::uint64_t ram_rows);

  std::uint64_t ram_rows() const { return ram_rows_; }
  std::uint64_t hot_rows() const { return hot_rows_; }
  std::uint64_t spilling_rows() const { return spilling_rows_; }
  std::uint64_t cold_rows() const { return cold_rows_; }
  bool cold(std::uint32_t slot) const { return state_[slot] == State::cold; }
  // Precondition: cold(slot).
  const ColdLocation& location(std::uint32_t slot) const { return locations_[slot]; }

  // A row was stored in `slot` with `key` (it is hot). O(1) amortised.
  void on_store(std::uint32_t slot, std::uint64_t key);
  // The row in `slot` was removed (evicted, deleted, expired, reset). O(1).
  void on_release(std::uint32_t slot);
  // A restored row (a snapshot's) that lies at `where`: cold at once. Precondition: `slot`
  // is empty. O(log segments).
  void restore_cold(std::uint32_t slot, const ColdLocation& where);

  // Up to `most` of the oldest hot rows beyond ram_rows, chosen to be written out; they
  // stay hot (readable in RAM) until on_spilled. `key_of(slot)` is the slot's current key
  // (a queued row whose slot holds another key was removed, and is skipped).
  // O(rows chosen + removed rows skipped).
  template <typename KeyOf>
  std::vector<SpillRow> choose_spill(std::uint64_t most, KeyOf key_of);
  // The write of a chosen row completed at `where`; the caller checked the slot still holds
  // the chosen key. The row is cold from now on. O(1).
  void on_spilled(std::uint32_t slot, const ColdLocation& where);
  // A chosen row could not be written out (a write error): it stays hot, and is chosen
  // again before any newer row. O(1).
  void on_spill_failed(const SpillRow& row);

  // Live cold rows of a segment: 0 once every row written to it was removed (a segment no
  // longer written to may then be deleted). O(log segments).
  std::uint64_t live_rows(std::uint32_t segment) const;
  // The bytes of those rows' records. O(log segments).
  std::uint64_t live_bytes(std::uint32_t segment) const;
  // How many cold rows were removed so far: the file tier looks for segments to compact
  // only when it changed. O(1).
  std::uint64_t cold_released() const { return cold_released_; }

  // Live rows of `segment` to move elsewhere, up to `most_rows` rows and `most_bytes` of
  // their records (at least one row when any is live), taken off the segment's slot list: the
  // caller moves each (on_moved) or gives them back (on_move_failed). O(rows chosen + stale entries
  // skipped).
  std::vector<MoveRow> choose_moves(std::uint32_t segment, std::uint64_t most_rows,
                                    std::uint64_t most_bytes);
  // A chosen row's record was copied to `to`: when the row still lies where it was chosen
  // (not removed, not written out again since), it lies at `to` from now on; otherwise the
  // copy is dead space. O(log segments).
  void on_moved(const MoveRow& row, const ColdLocation& to);
  // The copy failed: the chosen rows stay where they are, listed again. O(rows).
  void on_move_failed(std::span<const MoveRow> rows);
  // How many times some segment's live count fell to 0 (a reset counts once): the file tier
  // looks for segments to delete only when it changed. O(1).
  std::uint64_t segments_emptied() const { return segments_emptied_; }
  // Every row removed (a table reset): every slot empty, every segment emptied. O(capacity).
  void clear();
  // Entries of the queue of hot rows in store order (removed rows' entries included until
  // they are dropped: never more than twice the hot rows and kHotOrderSlack). For tests.
  std::size_t hot_order_entries() const { return hot_order_.size(); }
  static constexpr std::size_t kHotOrderSlack = 64;

 private:
  enum class State : std::uint8_t { empty, hot, spilling, cold };
  std::uint64_t ram_rows_;
  std::uint64_t hot_rows_ = 0;
  std::uint64_t spilling_rows_ = 0;  // chosen, not written out yet
  std::uint64_t cold_rows_ = 0;
  std::vector<State> state_;
  std::vector<ColdLocation> locations_;
  std::deque<SpillRow> hot_order_;  // hot rows in the order stored (removed ones left in)
  struct Live {
    std::uint64_t rows = 0;  // >= 1
    std::uint64_t bytes = 0;
  };
  // Drops the entries of removed rows from hot_order_ (a remover that evicts hot rows, or
  // a budget no row goes past, would otherwise leave them there for ever). O(entries);
  // amortised O(1) per row stored, as it runs when the entries reach twice the hot rows.
  void drop_removed_from_hot_order();
  // A cold row leaves its segment (removed, or moved away).
  void leave_segment(std::uint32_t slot);
  // A cold row lies at `where` from now on.
  void enter_segment(std::uint32_t slot, const ColdLocation& where);

  std::map<std::uint32_t, Live> live_;  // segment -> its live cold rows
  // segment -> slots written to it, in order (a slot that left it may still be listed, or
  // listed twice): dropped with the segment's last live row.
  std::map<std::uint32_t, std::vector<std::uint32_t>> slots_of_;
  std::uint64_t segments_emptied_ = 0;
  std::uint64_t cold_released_ = 0;
};

template <typename KeyOf>
std::vector<SpillRow> TierIndex::choose_spill(std::uint64_t most, KeyOf key_of) {
  std::vector<SpillRow> chosen;
  // Rows being written out count as gone already.
  const std::uint64_t staying = hot_rows_ - spilling_rows_;
  const std::uint64_t beyond = staying > ram_rows_ ? staying - ram_rows_ : 0;
  while (chosen.size() < most && chosen.size() < beyond && !hot_order_.empty()) {
    const SpillRow row = hot_order_.front();
    hot_order_.pop_front();
    if (state_[row.slot] != State::hot || key_of(row.slot) != row.key) continue;  // removed
    state_[row.slot] = State::spilling;
    ++spilling_rows_;
    chosen.push_back(row);
  }
  return chosen;
}

}  // namespace replayd
