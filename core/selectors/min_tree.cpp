#include "core/selectors/min_tree.h"

#include <algorithm>
#include <bit>

namespace replayd {

MinTree::MinTree(std::uint32_t capacity)
    : leaves_(std::bit_ceil(std::max<std::uint32_t>(capacity, 1))),
      nodes_(2 * static_cast<std::size_t>(leaves_), kEmpty) {}

std::uint64_t MinTree::bytes_for(std::uint32_t capacity) {
  return 2 * std::uint64_t{std::bit_ceil(std::max<std::uint32_t>(capacity, 1))} * sizeof(double);
}

void MinTree::set(std::uint32_t index, double value) {
  std::size_t node = leaves_ + index;
  nodes_[node] = value;
  for (node /= 2; node >= 1; node /= 2) {
    nodes_[node] = std::min(nodes_[2 * node], nodes_[2 * node + 1]);
  }
}

void MinTree::clear() {
  std::fill(nodes_.begin(), nodes_.end(), kEmpty);
}

}  // namespace replayd
