// Tests for core/min_tree.*: the minimum checked against a brute-force scan over long random
// sequences, including emptied leaves and capacities that are not powers of two.
#include "core/selectors/min_tree.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace replayd {
namespace {

TEST_CASE("min tree minimum agrees with a brute-force scan over 100k random operations") {
  for (std::uint32_t capacity : {1u, 6u, 128u, 1000u}) {
    MinTree tree(capacity);
    std::vector<double> leaves(capacity, MinTree::kEmpty);
    Rng rng(77 + capacity);
    for (int op = 0; op < 100000; ++op) {
      const auto index = static_cast<std::uint32_t>(rng.uniform_below(capacity));
      // A third of the sets empty a leaf, so the minimum often has to move up again.
      double value = MinTree::kEmpty;
      if (rng.uniform_below(3) != 0) value = rng.uniform_double() * 100.0 - 10.0;
      tree.set(index, value);
      leaves[index] = value;
      INFO("capacity " << capacity << ", operation " << op);
      REQUIRE(tree.min() == *std::min_element(leaves.begin(), leaves.end()));
    }
  }
}

TEST_CASE("an empty min tree reports kEmpty, and so does one whose leaves were all emptied") {
  MinTree tree(5);
  CHECK(tree.min() == MinTree::kEmpty);
  tree.set(3, 2.5);
  tree.set(4, 0.5);
  CHECK(tree.min() == 0.5);
  tree.set(4, MinTree::kEmpty);
  CHECK(tree.min() == 2.5);
  tree.set(3, MinTree::kEmpty);
  CHECK(tree.min() == MinTree::kEmpty);
}

TEST_CASE("clear empties every leaf") {
  MinTree tree(9);
  for (std::uint32_t i = 0; i < 9; ++i)
    tree.set(i, 1.0 + i);
  REQUIRE(tree.min() == 1.0);
  tree.clear();
  CHECK(tree.min() == MinTree::kEmpty);
  tree.set(8, 4.0);  // the last leaf, next to the padding of a non-power-of-two capacity
  CHECK(tree.min() == 4.0);
}

}  // namespace
}  // namespace replayd
