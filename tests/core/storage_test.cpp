// Tests for core/storage.*: keys are never reused (across release, eviction-style reuse and
// clear), stale keys are recognised, slot accounting, per-slot cells, the block layout and
// the stamps that let other processes read the columns.
#include "core/storage/storage.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <set>
#include <vector>

#include "core/rng.h"

namespace replayd {
namespace {

Schema test_schema() {
  auto schema = Schema::create({Field{"obs", DType::float32, {2, 3}},
                                Field{"act", DType::int64, {}}, Field{"done", DType::uint8, {}}});
  REQUIRE(schema.ok());
  return schema.value();
}

TEST_CASE("a new storage is empty and every acquire fills one slot until it is full") {
  Storage storage(test_schema(), 4);
  CHECK(storage.capacity() == 4);
  CHECK(storage.size() == 0);
  CHECK_FALSE(storage.full());
  std::set<std::uint32_t> slots;
  for (std::uint32_t i = 1; i <= 4; ++i) {
    const std::uint32_t slot = storage.acquire();
    CHECK(slot < 4);
    CHECK(storage.occupied(slot));
    slots.insert(slot);
    CHECK(storage.size() == i);
  }
  CHECK(slots.size() == 4);
  CHECK(storage.full());
  storage.release(2);
  CHECK_FALSE(storage.occupied(2));
  CHECK(storage.size() == 3);
  CHECK_FALSE(storage.full());
  CHECK(storage.acquire() == 2);  // the only free slot
  CHECK(storage.full());
}

TEST_CASE("keys are never reused across 100k release and acquire cycles") {
  Storage storage(test_schema(), 5);
  Rng rng(17);
  std::set<std::uint64_t> issued;
  std::vector<std::uint64_t> live_key_of_slot(5, 0);
  for (int i = 0; i < 5; ++i) {
    const auto slot = storage.acquire();
    live_key_of_slot[slot] = storage.key(slot);
    REQUIRE(issued.insert(storage.key(slot)).second);
  }
  for (int cycle = 0; cycle < 100000; ++cycle) {
    // Free a random slot (as eviction, delete or expiry would) and take a slot again.
    const auto victim = static_cast<std::uint32_t>(rng.uniform_below(5));
    const std::uint64_t old_key = live_key_of_slot[victim];
    storage.release(victim);
    REQUIRE_FALSE(storage.find(old_key).has_value());
    const auto slot = storage.acquire();
    REQUIRE(slot == victim);
    const std::uint64_t key = storage.key(slot);
    INFO("cycle " << cycle);
    REQUIRE(issued.insert(key).second);
    REQUIRE(storage.find(key) == slot);
    REQUIRE_FALSE(storage.find(old_key).has_value());  // the newcomer does not answer to it
    live_key_of_slot[slot] = key;
  }
}

TEST_CASE("keys stay unique and old keys stale after clear") {
  Storage storage(test_schema(), 3);
  std::set<std::uint64_t> before;
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 3; ++i) {
      const auto slot = storage.acquire();
      REQUIRE(before.insert(storage.key(slot)).second);
    }
    storage.clear();
    CHECK(storage.size() == 0);
    for (std::uint32_t slot = 0; slot < 3; ++slot)
      CHECK_FALSE(storage.occupied(slot));
    for (auto key : before)
      CHECK_FALSE(storage.find(key).has_value());
  }
  CHECK(before.size() == 12);
}

TEST_CASE("find returns nullopt for keys that were never issued") {
  Storage storage(test_schema(), 6);
  const auto slot = storage.acquire();
  const std::uint64_t key = storage.key(slot);
  REQUIRE(storage.find(key) == slot);
  CHECK_FALSE(storage.find(0).has_value());
  CHECK_FALSE(storage.find(key + 1).has_value());  // the neighbouring, empty slot
  CHECK_FALSE(storage.find(key ^ (std::uint64_t{1} << storage.slot_bits())).has_value());
  CHECK_FALSE(storage.find(key + (std::uint64_t{5} << storage.slot_bits())).has_value());
  CHECK_FALSE(storage.find(UINT64_MAX).has_value());
  // Slot bits naming a slot past the capacity (6 slots need 3 bits: 6 and 7 do not exist).
  CHECK_FALSE(storage.find((std::uint64_t{1} << storage.slot_bits()) | 7).has_value());
}

TEST_CASE("a storage of capacity 1 issues a fresh key on every acquire") {
  Storage storage(test_schema(), 1);
  std::set<std::uint64_t> keys;
  for (int i = 0; i < 1000; ++i) {
    const auto slot = storage.acquire();
    REQUIRE(slot == 0);
    REQUIRE(keys.insert(storage.key(slot)).second);
    REQUIRE(storage.find(storage.key(slot)) == 0u);
    storage.release(slot);
  }
}

TEST_CASE("an acquired slot starts with priority 0 and zero samples, whatever it held before") {
  Storage storage(test_schema(), 2);
  const auto slot = storage.acquire();
  storage.set_priority(slot, 3.5);
  storage.set_times_sampled(slot, 7);
  CHECK(storage.priority(slot) == 3.5);
  CHECK(storage.times_sampled(slot) == 7);
  storage.release(slot);
  REQUIRE(storage.acquire() == slot);
  CHECK(storage.priority(slot) == 0.0);
  CHECK(storage.times_sampled(slot) == 0);
}

TEST_CASE("each field of each slot has its own cell of item_bytes bytes") {
  const Schema schema = test_schema();
  const std::uint32_t capacity = 7;
  Storage storage(schema, capacity);
  for (std::size_t f = 0; f < schema.size(); ++f) {
    CHECK(storage.item_bytes(f) == schema.field(f).item_bytes());
  }
  // Fill every cell with a pattern unique to (field, slot), then read all of them back.
  for (std::uint32_t slot = 0; slot < capacity; ++slot) {
    for (std::size_t f = 0; f < schema.size(); ++f) {
      std::memset(storage.cell(f, slot), static_cast<int>(16 * f + slot + 1),
                  storage.item_bytes(f));
    }
  }
  const Storage& reader = storage;
  for (std::uint32_t slot = 0; slot < capacity; ++slot) {
    for (std::size_t f = 0; f < schema.size(); ++f) {
      const std::byte* cell = reader.cell(f, slot);
      for (std::uint64_t b = 0; b < reader.item_bytes(f); ++b) {
        INFO("field " << f << " slot " << slot << " byte " << b);
        REQUIRE(std::to_integer<int>(cell[b]) == static_cast<int>(16 * f + slot + 1));
      }
    }
  }
}

TEST_CASE("a key restored with occupy_with_key is found and later keys do not collide") {
  Storage storage(test_schema(), 4);
  const std::uint64_t restored = (std::uint64_t{9} << storage.slot_bits()) | 2;
  storage.set_generation(2, 9);
  storage.occupy_with_key(2, restored);
  CHECK(storage.find(restored) == 2u);
  CHECK(storage.size() == 1);
  std::set<std::uint64_t> keys{restored};
  for (int i = 0; i < 3; ++i) {
    const auto slot = storage.acquire();
    CHECK(slot != 2);
    CHECK(keys.insert(storage.key(slot)).second);
  }
  storage.release(2);
  REQUIRE(storage.acquire() == 2);
  CHECK(keys.insert(storage.key(2)).second);
  CHECK(storage.generation(2) == 10);
}

// The stamp of a slot as a process mapping the block reads it.
std::uint64_t stamp_of(const Storage& storage, std::uint32_t slot) {
  std::uint64_t stamp = 0;
  std::memcpy(&stamp, storage.memory().bytes().data() + storage.layout().stamps_offset + 8 * slot,
              8);
  return stamp;
}

TEST_CASE("a slot's stamp is 0 while its bytes may change and its key once published") {
  Storage storage(test_schema(), 4);
  for (std::uint32_t slot = 0; slot < 4; ++slot)
    CHECK(stamp_of(storage, slot) == 0);
  const auto slot = storage.acquire();
  CHECK(stamp_of(storage, slot) == 0);  // acquired, cells not written yet
  CHECK_FALSE(storage.stamp_holds_key(slot));
  storage.publish(slot);
  const std::uint64_t first_key = storage.key(slot);
  CHECK(stamp_of(storage, slot) == first_key);
  CHECK(storage.stamp_holds_key(slot));

  // Freed, the slot keeps its bytes and so its stamp: a reader holding the key may still
  // copy the item. Reused, the stamp turns 0 before the new bytes go in.
  storage.release(slot);
  CHECK(stamp_of(storage, slot) == first_key);
  storage.clear();
  CHECK(stamp_of(storage, slot) == first_key);
  REQUIRE(storage.acquire() == slot);
  CHECK(stamp_of(storage, slot) == 0);
  storage.publish(slot);
  CHECK(stamp_of(storage, slot) == storage.key(slot));
  CHECK(storage.key(slot) != first_key);
}

TEST_CASE("stamps and columns lie in one block where the layout says, page-aligned") {
  const Schema schema = test_schema();
  Storage storage(schema, 1000);
  const StorageLayout& layout = storage.layout();
  CHECK(layout.stamps_offset == 0);
  // 8000 bytes of stamps, then obs (24 bytes x 1000), act (8 x 1000), done (1 x 1000).
  CHECK(layout.column_offsets == std::vector<std::uint64_t>{8192, 8192 + 24576, 32768 + 8192});
  CHECK(layout.total_bytes == 40960 + 4096);
  const std::byte* base = storage.memory().bytes().data();
  CHECK(storage.memory().bytes().size() >= layout.total_bytes);
  for (std::size_t f = 0; f < schema.size(); ++f) {
    CHECK(layout.column_offsets[f] % StorageLayout::kAlignment == 0);
    CHECK(storage.cell(f, 0) == base + layout.column_offsets[f]);
    CHECK(storage.cell(f, 999) ==
          base + layout.column_offsets[f] + 999 * schema.field(f).item_bytes());
  }
}

TEST_CASE("a compressed field has no column in the block") {
  Field pixels{"pixels", DType::uint8, {8, 8}};
  pixels.compression = Compression::zstd;
  auto schema = Schema::create({Field{"rew", DType::float32, {}}, pixels});
  REQUIRE(schema.ok());
  const auto layout = StorageLayout::of(schema.value(), 10);
  CHECK(layout.column_offsets == std::vector<std::uint64_t>{4096, StorageLayout::kNoColumn});
  CHECK(layout.total_bytes == 8192);
}

}  // namespace
}  // namespace replayd
