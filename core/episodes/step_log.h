// StepLog: the stored steps of an episodic table in insertion order. Each stored step has a
// sequence number (1, 2, ... in insertion order, never reused), which is the cursor of a
// paginated read of everything: read after cursor c returns the stored steps with
// sequence > c, oldest first. Owned by the table. Not thread-safe.
//
// Invariants: entries_ is sorted by sequence; an entry is live iff sequence_[slot] equals
// its sequence; the front entry is live unless entries_ is empty; dead_ counts dead entries.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <vector>

namespace replayd {

class StepLog {
 public:
  explicit StepLog(std::uint32_t capacity) : sequence_(capacity, 0) {}

  // A step was stored in `slot`. O(1).
  void on_store(std::uint32_t slot);
  // The step in `slot` is removed. Amortized O(1).
  void on_remove(std::uint32_t slot);
  void clear();

  std::uint64_t sequence(std::uint32_t slot) const { return sequence_[slot]; }
  std::uint64_t last_sequence() const { return last_; }

  // Calls visit(slot, sequence) for up to max_n stored steps with sequence > after, in
  // insertion order. Returns how many were visited. O(log capacity + max_n) plus dead
  // entries skipped.
  template <typename Visit>
  std::uint64_t read(std::uint64_t after, std::uint64_t max_n, Visit visit) const;

  // Restore path: sets every occupied slot's sequence (0 for a free slot) and the last one
  // issued, then rebuilds the order. The caller validates (distinct, <= last). O(n log n).
  void restore(std::vector<std::uint64_t> sequences, std::uint64_t last);

 private:
  struct Entry {
    std::uint64_t sequence;
    std::uint32_t slot;
  };
  bool live(const Entry& entry) const { return sequence_[entry.slot] == entry.sequence; }

  std::vector<std::uint64_t> sequence_;  // per slot; 0 when free
  std::deque<Entry> entries_;
  std::uint64_t last_ = 0;
  std::uint64_t dead_ = 0;
};

template <typename Visit>
std::uint64_t StepLog::read(std::uint64_t after, std::uint64_t max_n, Visit visit) const {
  auto it =
      std::upper_bound(entries_.begin(), entries_.end(), after,
                       [](std::uint64_t value, const Entry& e) { return value < e.sequence; });
  std::uint64_t visited = 0;
  for (; it != entries_.end() && visited < max_n; ++it) {
    if (!live(*it)) continue;
    visit(it->slot, it->sequence);
    ++visited;
  }
  return visited;
}

}  // namespace replayd
