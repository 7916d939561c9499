// HeapSelector: max_heap always chooses the present slot with the largest priority, min_heap
// the one with the smallest. Among equal priorities it chooses the slot inserted or updated
// least recently (Reverb's rule), so a heap of equal priorities behaves as a FIFO queue.
// P = 1 and weight 1: the choice is deterministic.
// An indexed binary heap: slots in heap order plus each slot's position, priority and
// insertion/update stamp, all sized to capacity at construction (24 bytes per slot).
// Costs: insert, update, remove O(log n); sample O(1). Not thread-safe.
#pragma once

#include <vector>

#include "core/selectors/selector.h"

namespace replayd {

class HeapSelector final : public Selector {
 public:
  // `largest_first`: max_heap when true, min_heap when false.
  HeapSelector(std::uint32_t capacity, bool largest_first);

  // Heap array, position map, priority and stamp per slot.
  static std::uint64_t bytes_for(std::uint32_t capacity) {
    return std::uint64_t{capacity} * kBytesPerSlot;
  }
  std::uint64_t allocated_bytes() const override;

  void insert(std::uint32_t slot, double priority) override;
  void update(std::uint32_t slot, double priority) override;
  void remove(std::uint32_t slot) override;
  void clear() override;
  Pick sample(Rng& rng, double beta) const override;
  SelectorKind kind() const override {
    return largest_first_ ? SelectorKind::max_heap : SelectorKind::min_heap;
  }
  // Present slots by stamp, oldest first: re-inserting them in this order with their
  // priorities rebuilds the same choices, ties included. O(n log n), allocates n slots.
  void for_each_in_order(const std::function<void(std::uint32_t)>& visit) const override;

 private:
  static constexpr std::uint64_t kBytesPerSlot =
      2 * sizeof(std::uint32_t) + sizeof(double) + sizeof(std::uint64_t);
  static constexpr std::uint32_t kAbsent = UINT32_MAX;

  // Whether slot a is chosen before slot b.
  bool before(std::uint32_t a, std::uint32_t b) const;
  void place(std::uint32_t position, std::uint32_t slot);
  void sift_up(std::uint32_t position);
  void sift_down(std::uint32_t position);

  bool largest_first_;
  std::uint32_t size_ = 0;
  std::uint64_t next_stamp_ = 0;
  std::vector<std::uint32_t> heap_;      // heap_[0 .. size_) are slots in heap order
  std::vector<std::uint32_t> position_;  // index in heap_ of each slot, kAbsent if absent
  std::vector<double> priority_;         // priority of each present slot
  std::vector<std::uint64_t> stamp_;     // when each present slot was last inserted or updated
};

}  // namespace replayd
