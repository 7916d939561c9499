// Tests for core/storage/blob_column.*: one byte string per slot, copied on set, freed on
// clear, and byte accounting that always equals the sum of cost() over stored values.
#include "core/storage/blob_column.h"

#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "core/rng.h"

namespace replayd {
namespace {

std::span<const std::byte> bytes_of(std::string_view text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

std::string text_of(std::span<const std::byte> bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

TEST_CASE("a new blob column holds no values and costs only its per-slot index") {
  BlobColumn column(8);
  for (std::uint32_t slot = 0; slot < 8; ++slot)
    CHECK(column.get(slot).empty());
  CHECK(column.stored_bytes() == 0);
  CHECK(column.allocated_bytes() == 8 * BlobColumn::kIndexBytesPerSlot);
}

TEST_CASE("a stored value reads back byte for byte and is a copy of the caller's bytes") {
  BlobColumn column(4);
  std::string source = "zstd frame bytes";
  column.set(2, bytes_of(source));
  source.assign(source.size(), 'x');  // the caller reuses its buffer
  CHECK(text_of(column.get(2)) == "zstd frame bytes");
  CHECK(column.get(1).empty());
  CHECK(column.get(3).empty());
}

TEST_CASE("cost of a value is its size plus the per-value overhead, and zero for none") {
  CHECK(BlobColumn::cost(0) == 0);
  CHECK(BlobColumn::cost(1) == 1 + BlobColumn::kOverheadPerValue);
  CHECK(BlobColumn::cost(1000) == 1000 + BlobColumn::kOverheadPerValue);
}

TEST_CASE("replacing a value frees the old one's bytes in the accounting") {
  BlobColumn column(2);
  column.set(0, bytes_of("a long first value"));
  CHECK(column.stored_bytes() == BlobColumn::cost(18));
  column.set(0, bytes_of("short"));
  CHECK(text_of(column.get(0)) == "short");
  CHECK(column.stored_bytes() == BlobColumn::cost(5));
  CHECK(column.allocated_bytes() == BlobColumn::cost(5) + 2 * BlobColumn::kIndexBytesPerSlot);
}

TEST_CASE("setting an empty value stores nothing and frees what was there") {
  BlobColumn column(2);
  column.set(1, bytes_of("payload"));
  column.set(1, {});
  CHECK(column.get(1).empty());
  CHECK(column.stored_bytes() == 0);
}

TEST_CASE("clear frees one slot and clear_all frees every slot") {
  BlobColumn column(3);
  column.set(0, bytes_of("zero"));
  column.set(1, bytes_of("one"));
  column.set(2, bytes_of("two!"));
  column.clear(1);
  CHECK(column.get(1).empty());
  CHECK(text_of(column.get(0)) == "zero");
  CHECK(column.stored_bytes() == BlobColumn::cost(4) + BlobColumn::cost(4));
  column.clear(1);  // clearing an empty slot changes nothing
  CHECK(column.stored_bytes() == BlobColumn::cost(4) + BlobColumn::cost(4));
  column.clear_all();
  for (std::uint32_t slot = 0; slot < 3; ++slot)
    CHECK(column.get(slot).empty());
  CHECK(column.stored_bytes() == 0);
  CHECK(column.allocated_bytes() == 3 * BlobColumn::kIndexBytesPerSlot);
}

TEST_CASE("stored bytes equal the sum of costs after random sets and clears in any order") {
  constexpr std::uint32_t kSlots = 32;
  BlobColumn column(kSlots);
  std::vector<std::string> model(kSlots);
  Rng rng(5);
  for (int step = 0; step < 5000; ++step) {
    const auto slot = static_cast<std::uint32_t>(rng.next() % kSlots);
    if (rng.next() % 4 == 0) {
      column.clear(slot);
      model[slot].clear();
    } else {
      std::string value(rng.next() % 300, '\0');
      for (auto& c : value)
        c = static_cast<char>(rng.next());
      column.set(slot, bytes_of(value));
      model[slot] = value;
    }
  }
  std::uint64_t expected = 0;
  for (std::uint32_t slot = 0; slot < kSlots; ++slot) {
    REQUIRE(text_of(column.get(slot)) == model[slot]);
    expected += BlobColumn::cost(model[slot].size());
  }
  CHECK(column.stored_bytes() == expected);
  CHECK(column.allocated_bytes() == expected + kSlots * BlobColumn::kIndexBytesPerSlot);
}

}  // namespace
}  // namespace replayd
