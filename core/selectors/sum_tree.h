// SumTree: a complete binary tree over `capacity` non-negative leaf values whose inner nodes
// hold the sum of their children. set() and find() cost O(log capacity); total() is O(1).
// Memory: 2 * next_pow2(capacity) doubles, allocated once. Not thread-safe.
//
// Invariants: every inner node equals left + right exactly as computed by the last set()
// below it (sums are recomputed from children, never adjusted by deltas, so no rounding
// drift accumulates); a node is positive iff some leaf below it is positive.
#pragma once

#include <cstdint>
#include <vector>

namespace replayd {

class SumTree {
 public:
  explicit SumTree(std::uint32_t capacity);

  // Bytes a tree over `capacity` leaves allocates (2 * next_pow2(capacity) doubles), and
  // what this one holds (its vector's capacity). O(1).
  static std::uint64_t bytes_for(std::uint32_t capacity);
  std::uint64_t allocated_bytes() const { return nodes_.capacity() * sizeof(double); }

  std::uint32_t capacity() const { return capacity_; }
  // Sets leaf `index` (< capacity) to `value` (finite, >= 0).
  void set(std::uint32_t index, double value);
  double get(std::uint32_t index) const { return nodes_[leaves_ + index]; }
  double total() const { return nodes_[1]; }
  // Sets every leaf to 0. O(capacity).
  void clear();

  // Returns the leaf where the running sum of leaves passes `mass`, for mass in
  // [0, total()). Precondition: total() > 0. Always returns a leaf with a positive value,
  // even when rounding puts `mass` at or past the end of the last positive leaf.
  std::uint32_t find(double mass) const;

 private:
  std::uint32_t capacity_;
  std::uint32_t leaves_;       // next power of two >= capacity
  std::vector<double> nodes_;  // 1-based heap layout; nodes_[leaves_ + i] is leaf i
};

}  // namespace replayd
