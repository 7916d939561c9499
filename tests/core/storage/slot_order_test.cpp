// Tests for core/storage/slot_order.h: occupied slots in insertion order, with O(1) erase
// anywhere, checked against a std::list model on a random stream.
#include "core/storage/slot_order.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <list>
#include <vector>

#include "core/rng.h"

namespace replayd {
namespace {

std::vector<std::uint32_t> walk(const SlotOrder& order) {
  std::vector<std::uint32_t> slots;
  for (auto slot = order.oldest(); slot != SlotOrder::kNone; slot = order.next(slot))
    slots.push_back(slot);
  return slots;
}

TEST_CASE("a new slot order is empty and has no oldest or newest slot") {
  SlotOrder order(4);
  CHECK(order.empty());
  CHECK(order.oldest() == SlotOrder::kNone);
  CHECK(order.newest() == SlotOrder::kNone);
}

TEST_CASE("slots come back oldest first in the order they were pushed") {
  SlotOrder order(8);
  for (std::uint32_t slot : {5u, 1u, 7u, 0u})
    order.push_back(slot);
  CHECK_FALSE(order.empty());
  CHECK(order.oldest() == 5);
  CHECK(order.newest() == 0);
  CHECK(walk(order) == std::vector<std::uint32_t>{5, 1, 7, 0});
  CHECK(order.next(0) == SlotOrder::kNone);
}

TEST_CASE("erasing the oldest, the newest or a middle slot keeps the others in order") {
  SlotOrder order(8);
  for (std::uint32_t slot = 0; slot < 5; ++slot)
    order.push_back(slot);
  order.erase(2);
  CHECK(walk(order) == std::vector<std::uint32_t>{0, 1, 3, 4});
  order.erase(0);
  CHECK(order.oldest() == 1);
  order.erase(4);
  CHECK(order.newest() == 3);
  CHECK(walk(order) == std::vector<std::uint32_t>{1, 3});
  order.erase(1);
  order.erase(3);
  CHECK(order.empty());
  CHECK(order.newest() == SlotOrder::kNone);
}

TEST_CASE("an erased slot can be pushed again and becomes the newest") {
  SlotOrder order(3);
  order.push_back(0);
  order.push_back(1);
  order.push_back(2);
  order.erase(0);
  order.push_back(0);  // FIFO reuse of the oldest slot, as a full ring does
  CHECK(walk(order) == std::vector<std::uint32_t>{1, 2, 0});
  CHECK(order.newest() == 0);
}

TEST_CASE("clear empties the order and it can be filled again") {
  SlotOrder order(4);
  for (std::uint32_t slot = 0; slot < 4; ++slot)
    order.push_back(slot);
  order.clear();
  CHECK(order.empty());
  CHECK(walk(order).empty());
  order.push_back(3);
  CHECK(walk(order) == std::vector<std::uint32_t>{3});
}

TEST_CASE("slot order allocates two words per slot, as bytes_for says") {
  CHECK(SlotOrder::bytes_for(0) == 0);
  CHECK(SlotOrder::bytes_for(1000) == 8000);
  CHECK(SlotOrder::bytes_for(UINT32_MAX) == 8 * std::uint64_t{UINT32_MAX});
  SlotOrder order(1000);
  CHECK(order.allocated_bytes() == SlotOrder::bytes_for(1000));
}

TEST_CASE("slot order matches a list model on a random stream of pushes and erases") {
  constexpr std::uint32_t kSlots = 64;
  SlotOrder order(kSlots);
  std::list<std::uint32_t> model;
  std::vector<bool> present(kSlots, false);
  Rng rng(23);
  for (int step = 0; step < 20000; ++step) {
    const auto slot = static_cast<std::uint32_t>(rng.next() % kSlots);
    if (present[slot]) {
      order.erase(slot);
      model.remove(slot);
    } else {
      order.push_back(slot);
      model.push_back(slot);
    }
    present[slot] = !present[slot];
    if (step % 97 == 0) {
      REQUIRE(walk(order) == std::vector<std::uint32_t>(model.begin(), model.end()));
      REQUIRE(order.empty() == model.empty());
      if (!model.empty()) {
        REQUIRE(order.oldest() == model.front());
        REQUIRE(order.newest() == model.back());
      }
    }
  }
}

}  // namespace
}  // namespace replayd
