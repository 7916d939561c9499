// Tests for core/sum_tree.*: totals and find() checked against a brute-force vector of leaf
// values over long random sequences, plus the rounding guarantees at the end of the range.
#include "core/selectors/sum_tree.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace replayd {
namespace {

// The leaf a linear scan picks for `mass`: the first i with prefix(i+1) > mass. Also reports
// how close mass lies to the nearest prefix boundary, where rounding may legitimately differ.
struct ScanResult {
  std::uint32_t leaf;
  double boundary_distance;
};

ScanResult linear_find(const std::vector<double>& leaves, double mass) {
  long double prefix = 0;
  ScanResult result{0, INFINITY};
  bool found = false;
  for (std::uint32_t i = 0; i < leaves.size(); ++i) {
    const long double next = prefix + leaves[i];
    if (leaves[i] > 0) {
      result.boundary_distance =
          std::min<double>(result.boundary_distance, std::fabs(static_cast<double>(next) - mass));
      result.boundary_distance =
          std::min<double>(result.boundary_distance, std::fabs(static_cast<double>(prefix) - mass));
    }
    if (!found && mass < next && leaves[i] > 0) {
      result.leaf = i;
      found = true;
    }
    prefix = next;
  }
  return result;
}

long double brute_total(const std::vector<double>& leaves) {
  long double total = 0;
  for (double leaf : leaves)
    total += leaf;
  return total;
}

TEST_CASE("sum tree total and find agree with a linear scan over 100k random operations") {
  for (std::uint32_t capacity : {1u, 7u, 64u, 300u}) {
    SumTree tree(capacity);
    std::vector<double> leaves(capacity, 0.0);
    Rng rng(1234 + capacity);
    std::uint64_t finds = 0;
    std::uint64_t finds_compared = 0;
    for (int op = 0; op < 100000; ++op) {
      INFO("capacity " << capacity << ", operation " << op);
      if (rng.uniform_below(2) == 0) {
        const auto index = static_cast<std::uint32_t>(rng.uniform_below(capacity));
        double value = 0.0;
        switch (rng.uniform_below(4)) {
          case 0:
            value = 0.0;
            break;  // emptied leaf
          case 1:
            value = rng.uniform_double();
            break;  // typical priority
          case 2:
            value = std::ldexp(rng.uniform_double(), -40);
            break;  // tiny
          case 3:
            value = 1e6 * rng.uniform_double();
            break;  // large
        }
        tree.set(index, value);
        leaves[index] = value;
        REQUIRE(tree.get(index) == value);
      } else {
        const long double total = brute_total(leaves);
        REQUIRE(std::fabs(tree.total() - static_cast<double>(total)) <=
                1e-12 * static_cast<double>(total));
        if (tree.total() <= 0) continue;
        ++finds;
        const double mass = rng.uniform_double() * tree.total();
        const std::uint32_t leaf = tree.find(mass);
        REQUIRE(leaf < capacity);
        REQUIRE(leaves[leaf] > 0);
        const ScanResult scan = linear_find(leaves, mass);
        if (scan.boundary_distance > 1e-9 * tree.total()) {
          REQUIRE(leaf == scan.leaf);
          ++finds_compared;
        }
      }
    }
    // The boundary exclusion must not hide the comparison for more than a sliver of draws.
    CHECK(finds > 30000);
    CHECK(finds_compared > finds * 99 / 100);
  }
}

TEST_CASE("find never returns a zero leaf, even for mass == total or just below it") {
  SumTree tree(10);
  // Zero leaves at both ends and in the middle; positive ones of very different sizes.
  const std::vector<double> values{0, 0.1, 0, 1e-300, 3.3, 0, 0.7, 1e-17, 0, 0};
  for (std::uint32_t i = 0; i < values.size(); ++i)
    tree.set(i, values[i]);
  const double total = tree.total();
  for (double mass : {0.0, total, std::nextafter(total, 0.0), total * (1 + 1e-15)}) {
    INFO("mass " << mass);
    const std::uint32_t leaf = tree.find(mass);
    REQUIRE(leaf < 10);
    CHECK(values[leaf] > 0);
  }
  CHECK(tree.find(0.0) == 1);  // the first positive leaf
}

TEST_CASE("find never returns a zero leaf at any mass in a random sparse tree") {
  Rng rng(99);
  SumTree tree(1000);
  std::vector<double> values(1000, 0.0);
  for (int i = 0; i < 30; ++i) {
    const auto index = static_cast<std::uint32_t>(rng.uniform_below(1000));
    values[index] = rng.uniform_double() * std::pow(10.0, static_cast<double>(i % 9) - 4);
    tree.set(index, values[index]);
  }
  for (int i = 0; i < 100000; ++i) {
    // Masses spread over [0, total], with every tenth one pinned at or near the top end.
    double mass = rng.uniform_double() * tree.total();
    if (i % 10 == 0) mass = std::nextafter(tree.total(), 0.0) * (1 - (i % 3) * 1e-16);
    if (i % 100 == 0) mass = tree.total();
    REQUIRE(values[tree.find(mass)] > 0);
  }
}

TEST_CASE("sums are recomputed, so zeroing every leaf gives a total of exactly 0") {
  SumTree tree(513);
  Rng rng(5);
  for (int round = 0; round < 20; ++round) {
    for (std::uint32_t i = 0; i < 513; ++i)
      tree.set(i, rng.uniform_double() * 1e3 + 1e-9);
  }
  for (std::uint32_t i = 0; i < 513; ++i)
    tree.set(i, 0.0);
  CHECK(tree.total() == 0.0);
  tree.set(200, 0.25);
  CHECK(tree.total() == 0.25);
  CHECK(tree.find(0.0) == 200);
}

TEST_CASE("clear sets every leaf and the total to 0") {
  SumTree tree(5);
  for (std::uint32_t i = 0; i < 5; ++i)
    tree.set(i, 1.0 + i);
  REQUIRE(tree.total() == 15.0);
  tree.clear();
  CHECK(tree.total() == 0.0);
  for (std::uint32_t i = 0; i < 5; ++i)
    CHECK(tree.get(i) == 0.0);
  tree.set(4, 2.0);
  CHECK(tree.find(1.0) == 4);
  CHECK(tree.capacity() == 5);
}

}  // namespace
}  // namespace replayd
