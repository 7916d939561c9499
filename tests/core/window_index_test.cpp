// Tests for core/window_index.*: the valid-start rule (stride, backward, forward, short
// windows at an ended episode), incremental upkeep on append, end and removal, and the
// bound on distinct requirements. The table-level reference test covers random streams.
#include "core/episodes/window_index.h"

#include <catch2/catch.hpp>

#include "core/schema.h"

namespace replayd {
namespace {

struct Fixture {
  Schema schema = Schema::create({Field{"x", DType::uint8, {}}}).value();
  Storage storage{schema, 16};
  EpisodeIndex episodes{16};
  WindowContext context{&storage, &episodes, false, 1.0, 0};
  WindowIndexSet windows{context};

  std::uint32_t append(std::uint64_t episode) {
    const std::uint32_t slot = storage.acquire();
    episodes.append(episode, slot);
    windows.on_append(slot);
    return slot;
  }
  void remove(std::uint32_t slot) {
    const StepRef ref = episodes.step(slot);
    windows.on_remove(slot, ref, *episodes.find(ref.episode));
    episodes.remove(slot);
    storage.release(slot);
  }
  void end(std::uint64_t episode) {
    episodes.end(episode, EpisodeState::terminated);
    if (const Episode* e = episodes.find(episode)) windows.on_end(*e);
  }
};

TEST_CASE("a forward window is valid once its last step is stored") {
  Fixture f;
  WindowIndex& three = *f.windows.get({3, false, 1, 0});
  const auto e = f.episodes.open(1);
  const auto s0 = f.append(e);
  f.append(e);
  CHECK(three.size() == 0);
  f.append(e);
  CHECK(three.size() == 1);
  CHECK(three.contains(s0));
}

TEST_CASE("short windows become valid when the episode ends, only where allowed") {
  Fixture f;
  WindowIndex& strict = *f.windows.get({3, false, 1, 0});
  WindowIndex& short_ok = *f.windows.get({3, true, 1, 0});
  const auto e = f.episodes.open(1);
  for (int i = 0; i < 4; ++i)
    f.append(e);
  CHECK(short_ok.size() == 2);
  f.end(e);
  CHECK(strict.size() == 2);
  CHECK(short_ok.size() == 4);
}

TEST_CASE("removing a step drops every start whose window holds it, forward and backward") {
  Fixture f;
  WindowIndex& index = *f.windows.get({2, true, 1, 1});
  const auto e = f.episodes.open(1);
  std::vector<std::uint32_t> slots;
  for (int i = 0; i < 6; ++i)
    slots.push_back(f.append(e));
  f.end(e);
  CHECK(index.size() == 6);
  f.remove(slots[3]);  // forward of starts 2, 3; backward of start 4
  CHECK(index.size() == 3);
  CHECK(index.contains(slots[0]));
  CHECK(index.contains(slots[1]));
  CHECK(index.contains(slots[5]));
}

TEST_CASE("strides keep only starts at multiples of the stride") {
  Fixture f;
  const auto e = f.episodes.open(1);
  for (int i = 0; i < 7; ++i)
    f.append(e);
  // Built after the steps: the scan gives what upkeep would have given.
  WindowIndex& index = *f.windows.get({2, false, 3, 0});
  CHECK(index.size() == 2);  // positions 0 and 3; 6 lacks a second step
  f.append(e);
  CHECK(index.size() == 3);
}

TEST_CASE("a window set holds at most kMaxIndexes requirements, dropping the least recently used") {
  Fixture f;
  for (std::uint32_t k = 1; k <= WindowIndexSet::kMaxIndexes; ++k)
    CHECK(f.windows.get({k, true, 1, 0}) != nullptr);
  WindowIndex* first = f.windows.get({1, true, 1, 0});  // an existing one is found (and used)
  CHECK(f.windows.size() == WindowIndexSet::kMaxIndexes);
  CHECK(f.windows.get({1, false, 1, 0}) != nullptr);  // a new one takes k = 2's place
  CHECK(f.windows.size() == WindowIndexSet::kMaxIndexes);
  CHECK(f.windows.get({1, true, 1, 0}) == first);  // k = 1 was used since: still there
  bool k2_found = false;
  for (std::size_t i = 0; i < f.windows.size(); ++i)
    k2_found = k2_found || f.windows.at(i).spec() == WindowSpec{2, true, 1, 0};
  CHECK_FALSE(k2_found);
  f.windows.clear();
  CHECK(f.windows.size() == 0);
}

}  // namespace
}  // namespace replayd
