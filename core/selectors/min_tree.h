// MinTree: a complete binary tree over `capacity` leaf values whose inner nodes hold the
// minimum of their children; empty leaves hold +infinity. set() costs O(log capacity),
// min() is O(1). Memory: 2 * next_pow2(capacity) doubles, allocated once. Not thread-safe.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace replayd {

class MinTree {
 public:
  static constexpr double kEmpty = std::numeric_limits<double>::infinity();

  explicit MinTree(std::uint32_t capacity);

  // Bytes a tree over `capacity` leaves allocates, and what this one holds. O(1).
  static std::uint64_t bytes_for(std::uint32_t capacity);
  std::uint64_t allocated_bytes() const { return nodes_.capacity() * sizeof(double); }

  // Sets leaf `index` (< capacity); kEmpty removes it from the minimum.
  void set(std::uint32_t index, double value);
  // Smallest leaf value, kEmpty when every leaf is empty.
  double min() const { return nodes_[1]; }
  // Empties every leaf. O(capacity).
  void clear();

 private:
  std::uint32_t leaves_;
  std::vector<double> nodes_;
};

}  // namespace replayd
