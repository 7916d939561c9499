// Tests for core/step_log.*: insertion order, pages after a cursor, removals at the front
// and in the middle (with compaction), reset keeping sequences unique, restore.
#include "core/episodes/step_log.h"

#include <catch2/catch.hpp>

#include <vector>

namespace replayd {
namespace {

std::vector<std::uint32_t> slots_after(const StepLog& log, std::uint64_t after,
                                       std::uint64_t max_n = 1000) {
  std::vector<std::uint32_t> slots;
  log.read(after, max_n, [&](std::uint32_t slot, std::uint64_t) { slots.push_back(slot); });
  return slots;
}

TEST_CASE("the step log reads stored steps in insertion order after a cursor") {
  StepLog log(8);
  for (std::uint32_t slot : {5u, 2u, 7u, 0u})
    log.on_store(slot);
  CHECK(slots_after(log, 0) == std::vector<std::uint32_t>{5, 2, 7, 0});
  CHECK(slots_after(log, log.sequence(2)) == std::vector<std::uint32_t>{7, 0});
  CHECK(slots_after(log, 0, 2) == std::vector<std::uint32_t>{5, 2});
  log.on_remove(5);  // front
  log.on_remove(7);  // middle
  CHECK(slots_after(log, 0) == std::vector<std::uint32_t>{2, 0});
  log.on_store(5);  // a reused slot comes last, with a new sequence
  CHECK(slots_after(log, 0) == std::vector<std::uint32_t>{2, 0, 5});
  CHECK(log.sequence(5) == 5);
}

TEST_CASE("many removals in the middle leave the order intact") {
  constexpr std::uint32_t kSlots = 400;
  StepLog log(kSlots);
  for (std::uint32_t slot = 0; slot < kSlots; ++slot)
    log.on_store(slot);
  std::vector<std::uint32_t> expected{0};
  for (std::uint32_t slot = 1; slot < kSlots; ++slot) {
    if (slot % 3 != 0) {
      log.on_remove(slot);  // the front (slot 0) stays, so holes pile up and get compacted
    } else {
      expected.push_back(slot);
    }
  }
  CHECK(slots_after(log, 0) == expected);
  CHECK(slots_after(log, log.sequence(300)) ==
        std::vector<std::uint32_t>(expected.end() - 33, expected.end()));
}

TEST_CASE("sequences stay unique across a clear and survive a restore") {
  StepLog log(4);
  log.on_store(1);
  log.on_store(2);
  log.clear();
  CHECK(slots_after(log, 0).empty());
  log.on_store(1);
  CHECK(log.sequence(1) == 3);
  StepLog restored(4);
  restored.restore({0, 3, 0, 0}, log.last_sequence());
  CHECK(slots_after(restored, 0) == std::vector<std::uint32_t>{1});
  restored.on_store(2);
  CHECK(restored.sequence(2) == 4);
}

}  // namespace
}  // namespace replayd
