// SlotOrder: occupied slots in insertion order, as a doubly linked list threaded through two
// arrays indexed by slot. push_back, erase, oldest and newest are O(1); no allocation after
// construction. Not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

namespace replayd {

class SlotOrder {
 public:
  static constexpr std::uint32_t kNone = UINT32_MAX;

  explicit SlotOrder(std::uint32_t capacity) : prev_(capacity, kNone), next_(capacity, kNone) {}

  // Bytes an order over `capacity` slots allocates, and what this one holds. O(1).
  static std::uint64_t bytes_for(std::uint32_t capacity) {
    return 2 * std::uint64_t{capacity} * sizeof(std::uint32_t);
  }
  std::uint64_t allocated_bytes() const {
    return (prev_.capacity() + next_.capacity()) * sizeof(std::uint32_t);
  }

  bool empty() const { return head_ == kNone; }
  std::uint32_t oldest() const { return head_; }
  std::uint32_t newest() const { return tail_; }
  // The slot inserted after `slot` (a present slot), or kNone for the newest.
  std::uint32_t next(std::uint32_t slot) const { return next_[slot]; }

  // Precondition: slot is not in the list.
  void push_back(std::uint32_t slot) {
    prev_[slot] = tail_;
    next_[slot] = kNone;
    if (tail_ != kNone)
      next_[tail_] = slot;
    else
      head_ = slot;
    tail_ = slot;
  }
  // Precondition: slot is in the list.
  void erase(std::uint32_t slot) {
    const std::uint32_t before = prev_[slot];
    const std::uint32_t after = next_[slot];
    if (before != kNone)
      next_[before] = after;
    else
      head_ = after;
    if (after != kNone)
      prev_[after] = before;
    else
      tail_ = before;
    prev_[slot] = next_[slot] = kNone;
  }
  void clear() {
    while (!empty())
      erase(head_);
  }

 private:
  std::vector<std::uint32_t> prev_;
  std::vector<std::uint32_t> next_;
  std::uint32_t head_ = kNone;
  std::uint32_t tail_ = kNone;
};

}  // namespace replayd
