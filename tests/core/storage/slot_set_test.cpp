// Tests for core/storage/slot_set.h: a dense set of occupied slots whose members are exactly
// what was inserted and not erased, so picking a dense index is a uniform member.
#include "core/storage/slot_set.h"

#include <catch2/catch.hpp>

#include <set>
#include <vector>

#include "core/rng.h"

namespace replayd {
namespace {

std::set<std::uint32_t> members(const SlotSet& set) {
  std::set<std::uint32_t> result;
  for (std::uint32_t i = 0; i < set.size(); ++i)
    result.insert(set.at(i));
  return result;
}

TEST_CASE("a new slot set is empty and contains no slot") {
  SlotSet set(4);
  CHECK(set.size() == 0);
  for (std::uint32_t slot = 0; slot < 4; ++slot)
    CHECK_FALSE(set.contains(slot));
}

TEST_CASE("inserted slots are members and erased ones are not") {
  SlotSet set(10);
  set.insert(3);
  set.insert(9);
  set.insert(0);
  CHECK(set.size() == 3);
  CHECK(set.contains(3));
  CHECK(set.contains(9));
  CHECK_FALSE(set.contains(4));
  CHECK(members(set) == std::set<std::uint32_t>{0, 3, 9});
  set.erase(3);  // a hole in the middle is filled by the last member
  CHECK_FALSE(set.contains(3));
  CHECK(members(set) == std::set<std::uint32_t>{0, 9});
  set.erase(0);  // erasing the last member
  set.erase(9);
  CHECK(set.size() == 0);
}

TEST_CASE("an erased slot can be inserted again") {
  SlotSet set(2);
  set.insert(1);
  set.erase(1);
  set.insert(1);
  CHECK(set.contains(1));
  CHECK(set.size() == 1);
  CHECK(set.at(0) == 1);
}

TEST_CASE("a slot set holds every slot when full and clear empties it") {
  SlotSet set(16);
  for (std::uint32_t slot = 0; slot < 16; ++slot)
    set.insert(15 - slot);
  CHECK(set.size() == 16);
  CHECK(members(set).size() == 16);
  set.clear();
  CHECK(set.size() == 0);
  for (std::uint32_t slot = 0; slot < 16; ++slot)
    CHECK_FALSE(set.contains(slot));
  set.insert(7);
  CHECK(members(set) == std::set<std::uint32_t>{7});
}

TEST_CASE("slot set allocates two words per slot, as bytes_for says") {
  CHECK(SlotSet::bytes_for(0) == 0);
  CHECK(SlotSet::bytes_for(1000) == 8000);
  SlotSet set(1000);
  CHECK(set.allocated_bytes() == SlotSet::bytes_for(1000));
  for (std::uint32_t slot = 0; slot < 1000; ++slot)
    set.insert(slot);
  CHECK(set.allocated_bytes() == SlotSet::bytes_for(1000));  // no growth after construction
}

TEST_CASE("slot set matches a set model on a random stream of inserts and erases") {
  constexpr std::uint32_t kSlots = 50;
  SlotSet set(kSlots);
  std::set<std::uint32_t> model;
  Rng rng(29);
  for (int step = 0; step < 20000; ++step) {
    const auto slot = static_cast<std::uint32_t>(rng.next() % kSlots);
    if (model.count(slot)) {
      set.erase(slot);
      model.erase(slot);
    } else {
      set.insert(slot);
      model.insert(slot);
    }
    REQUIRE(set.size() == model.size());
    REQUIRE(set.contains(slot) == (model.count(slot) == 1));
    if (step % 101 == 0) REQUIRE(members(set) == model);
  }
}

TEST_CASE("picking a uniformly random dense index reaches every member about equally") {
  SlotSet set(100);
  for (std::uint32_t slot = 0; slot < 100; slot += 10)
    set.insert(slot);  // 10 members
  set.erase(50);
  set.insert(55);
  Rng rng(31);
  std::vector<int> hits(100, 0);
  constexpr int kDraws = 20000;
  for (int i = 0; i < kDraws; ++i)
    ++hits[set.at(static_cast<std::uint32_t>(rng.next() % set.size()))];
  for (std::uint32_t slot = 0; slot < 100; ++slot) {
    if (set.contains(slot)) {
      CHECK(hits[slot] > kDraws / 10 * 0.9);
      CHECK(hits[slot] < kDraws / 10 * 1.1);
    } else {
      CHECK(hits[slot] == 0);
    }
  }
}

}  // namespace
}  // namespace replayd
