// Tests for core/episodes/slot_queue.h: an episode's slots, oldest first, behave as a
// double-ended queue of pushes at the back and drops at the front, against std::deque on a
// random stream of operations, across the compactions of the front.
#include "core/episodes/slot_queue.h"

#include <catch2/catch.hpp>

#include <deque>
#include <vector>

#include "core/rng.h"

namespace replayd {
namespace {

void check_same(const SlotQueue& queue, const std::deque<std::uint32_t>& reference) {
  REQUIRE(queue.size() == reference.size());
  REQUIRE(queue.empty() == reference.empty());
  if (!reference.empty()) CHECK(queue.front() == reference.front());
  const std::vector<std::uint32_t> seen(queue.begin(), queue.end());
  CHECK(seen == std::vector<std::uint32_t>(reference.begin(), reference.end()));
  for (std::size_t i = 0; i < reference.size(); ++i)
    REQUIRE(queue[i] == reference[i]);
}

TEST_CASE("an episode's slot queue matches a deque on a random stream of pushes and drops") {
  Rng rng(7);
  SlotQueue queue;
  std::deque<std::uint32_t> reference;
  std::uint32_t next = 0;
  for (int op = 0; op < 20000; ++op) {
    // Long runs of each (an episode growing, then the table evicting its oldest steps).
    const bool grow = (op / 300) % 2 == 0 ? rng.uniform_below(4) != 0 : rng.uniform_below(4) == 0;
    if (grow || reference.empty()) {
      queue.push_back(next);
      reference.push_back(next++);
    } else {
      queue.pop_front();
      reference.pop_front();
    }
    if (op % 97 == 0) check_same(queue, reference);
  }
  check_same(queue, reference);
}

TEST_CASE("a slot written through the queue's index is the one read back") {
  SlotQueue queue;
  for (std::uint32_t s = 0; s < 40; ++s)
    queue.push_back(s);
  for (int i = 0; i < 20; ++i)
    queue.pop_front();  // past the compaction threshold
  queue[0] = 99;
  CHECK(queue.front() == 99);
  CHECK(queue[19] == 39);
  CHECK(queue.size() == 20);
}

TEST_CASE("dropping the last slot leaves an empty queue that takes new slots") {
  SlotQueue queue;
  CHECK(queue.empty());
  queue.push_back(5);
  queue.pop_front();
  CHECK(queue.empty());
  CHECK(queue.begin() == queue.end());
  queue.push_back(6);
  CHECK(queue.front() == 6);
  queue.clear();
  CHECK(queue.empty());
}

}  // namespace
}  // namespace replayd
