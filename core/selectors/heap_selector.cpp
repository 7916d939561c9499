#include "core/selectors/heap_selector.h"

#include <algorithm>

namespace replayd {

HeapSelector::HeapSelector(std::uint32_t capacity, bool largest_first)
    : largest_first_(largest_first),
      heap_(capacity, kAbsent),
      position_(capacity, kAbsent),
      priority_(capacity, 0.0),
      stamp_(capacity, 0) {}

std::uint64_t HeapSelector::allocated_bytes() const {
  return (heap_.capacity() + position_.capacity()) * sizeof(std::uint32_t) +
         priority_.capacity() * sizeof(double) + stamp_.capacity() * sizeof(std::uint64_t);
}

bool HeapSelector::before(std::uint32_t a, std::uint32_t b) const {
  if (priority_[a] != priority_[b]) {
    return largest_first_ ? priority_[a] > priority_[b] : priority_[a] < priority_[b];
  }
  return stamp_[a] < stamp_[b];
}

void HeapSelector::place(std::uint32_t position, std::uint32_t slot) {
  heap_[position] = slot;
  position_[slot] = position;
}

void HeapSelector::sift_up(std::uint32_t position) {
  const std::uint32_t slot = heap_[position];
  while (position > 0) {
    const std::uint32_t parent = (position - 1) / 2;
    if (!before(slot, heap_[parent])) break;
    place(position, heap_[parent]);
    position = parent;
  }
  place(position, slot);
}

void HeapSelector::sift_down(std::uint32_t position) {
  const std::uint32_t slot = heap_[position];
  for (;;) {
    const std::uint64_t left = 2 * std::uint64_t{position} + 1;
    if (left >= size_) break;
    auto child = static_cast<std::uint32_t>(left);
    if (left + 1 < size_ && before(heap_[child + 1], heap_[child])) ++child;
    if (!before(heap_[child], slot)) break;
    place(position, heap_[child]);
    position = child;
  }
  place(position, slot);
}

void HeapSelector::insert(std::uint32_t slot, double priority) {
  priority_[slot] = priority;
  stamp_[slot] = next_stamp_++;
  place(size_, slot);
  ++size_;
  sift_up(size_ - 1);
}

void HeapSelector::update(std::uint32_t slot, double priority) {
  priority_[slot] = priority;
  stamp_[slot] = next_stamp_++;
  // The new key may move the slot either way; one of the two sifts is a no-op.
  sift_up(position_[slot]);
  sift_down(position_[slot]);
}

void HeapSelector::remove(std::uint32_t slot) {
  const std::uint32_t position = position_[slot];
  position_[slot] = kAbsent;
  --size_;
  if (position == size_) return;
  const std::uint32_t moved = heap_[size_];
  place(position, moved);
  sift_up(position);
  sift_down(position_[moved]);
}

void HeapSelector::clear() {
  for (std::uint32_t i = 0; i < size_; ++i)
    position_[heap_[i]] = kAbsent;
  size_ = 0;
}

Pick HeapSelector::sample(Rng&, double) const {
  return Pick{heap_[0], 1.0, 1.0};
}

void HeapSelector::for_each_in_order(const std::function<void(std::uint32_t)>& visit) const {
  std::vector<std::uint32_t> slots(heap_.begin(), heap_.begin() + size_);
  std::sort(slots.begin(), slots.end(),
            [&](std::uint32_t a, std::uint32_t b) { return stamp_[a] < stamp_[b]; });
  for (auto slot : slots)
    visit(slot);
}

}  // namespace replayd
