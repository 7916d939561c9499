// SlotSet: the set of occupied slots kept dense, so a uniformly random member costs O(1).
// insert, erase and pick are O(1); memory is two arrays of `capacity` words, allocated once.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

namespace replayd {

class SlotSet {
 public:
  static constexpr std::uint32_t kAbsent = UINT32_MAX;

  explicit SlotSet(std::uint32_t capacity) : position_(capacity, kAbsent) {
    members_.reserve(capacity);
  }

  // Bytes a set over `capacity` slots allocates, and what this one holds. O(1).
  static std::uint64_t bytes_for(std::uint32_t capacity) {
    return 2 * std::uint64_t{capacity} * sizeof(std::uint32_t);
  }
  std::uint64_t allocated_bytes() const {
    return (members_.capacity() + position_.capacity()) * sizeof(std::uint32_t);
  }

  std::uint32_t size() const { return static_cast<std::uint32_t>(members_.size()); }
  bool contains(std::uint32_t slot) const { return position_[slot] != kAbsent; }
  // Precondition: !contains(slot).
  void insert(std::uint32_t slot) {
    position_[slot] = size();
    members_.push_back(slot);
  }
  // Precondition: contains(slot). Moves the last member into the hole.
  void erase(std::uint32_t slot) {
    const std::uint32_t hole = position_[slot];
    const std::uint32_t last = members_.back();
    members_[hole] = last;
    position_[last] = hole;
    members_.pop_back();
    position_[slot] = kAbsent;
  }
  // The member at dense index i < size().
  std::uint32_t at(std::uint32_t i) const { return members_[i]; }
  void clear() {
    for (auto slot : members_)
      position_[slot] = kAbsent;
    members_.clear();
  }

 private:
  std::vector<std::uint32_t> members_;
  std::vector<std::uint32_t> position_;  // dense index of each slot, kAbsent if not a member
};

}  // namespace replayd
