// SlotQueue: the slots of one episode's steps, oldest first: appended at the back, dropped
// from the front as the table evicts them. A vector and a head offset: an empty queue
// allocates nothing, and a short one a single small block (an episode of one step costs the
// table ~32 bytes of heap here, where a std::deque took 576). The front is compacted away
// once it is at least half of the vector, so each step is moved at most once on average.
// Not thread-safe; owned by its Episode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace replayd {

class SlotQueue {
 public:
  bool empty() const { return head_ == slots_.size(); }
  std::size_t size() const { return slots_.size() - head_; }
  std::uint32_t front() const { return slots_[head_]; }
  std::uint32_t& operator[](std::size_t i) { return slots_[head_ + i]; }
  std::uint32_t operator[](std::size_t i) const { return slots_[head_ + i]; }
  auto begin() const { return slots_.begin() + static_cast<std::ptrdiff_t>(head_); }
  auto end() const { return slots_.end(); }

  void push_back(std::uint32_t slot) { slots_.push_back(slot); }
  // Precondition: !empty(). Amortized O(1).
  void pop_front() {
    ++head_;
    if (head_ == slots_.size()) {
      clear();
    } else if (head_ >= kCompactAfter && 2 * head_ >= slots_.size()) {
      slots_.erase(slots_.begin(), slots_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }
  // Empties the queue and returns its memory.
  void clear() {
    std::vector<std::uint32_t>().swap(slots_);
    head_ = 0;
  }

 private:
  static constexpr std::size_t kCompactAfter = 16;  // dropped slots kept before compacting
  std::vector<std::uint32_t> slots_;
  std::size_t head_ = 0;  // slots_[0, head_) are dropped
};

}  // namespace replayd
