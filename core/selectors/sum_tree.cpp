#include "core/selectors/sum_tree.h"

#include <algorithm>
#include <bit>

namespace replayd {

SumTree::SumTree(std::uint32_t capacity)
    : capacity_(capacity),
      leaves_(std::bit_ceil(std::max<std::uint32_t>(capacity, 1))),
      nodes_(2 * static_cast<std::size_t>(leaves_), 0.0) {}

std::uint64_t SumTree::bytes_for(std::uint32_t capacity) {
  return 2 * std::uint64_t{std::bit_ceil(std::max<std::uint32_t>(capacity, 1))} * sizeof(double);
}

void SumTree::set(std::uint32_t index, double value) {
  std::size_t node = leaves_ + index;
  nodes_[node] = value;
  for (node /= 2; node >= 1; node /= 2)
    nodes_[node] = nodes_[2 * node] + nodes_[2 * node + 1];
}

void SumTree::clear() {
  std::fill(nodes_.begin(), nodes_.end(), 0.0);
}

std::uint32_t SumTree::find(double mass) const {
  std::size_t node = 1;
  while (node < leaves_) {
    const std::size_t left = 2 * node;
    const double left_sum = nodes_[left];
    if ((mass < left_sum && left_sum > 0) || nodes_[left + 1] <= 0) {
      node = left;
    } else {
      mass -= left_sum;
      node = left + 1;
    }
  }
  return static_cast<std::uint32_t>(node - leaves_);
}

}  // namespace replayd
