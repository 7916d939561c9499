// Tests for core/batch_layout.*: column offsets of a batch, aligned so each column can be
// viewed in place, and overflow detection for batch sizes a client might send.
#include "service/protocol/batch_layout.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace replayd {
namespace {

TEST_CASE("columns follow each other in order, each starting on an 8-byte boundary") {
  const std::vector<std::uint64_t> bytes_per_item{4, 8, 1, 16, 3};
  const std::uint64_t items = 3;
  auto layout = layout_columns(bytes_per_item, items);
  REQUIRE(layout.ok());
  // Column bytes: 12, 24, 3, 48, 9 -> padded to 16, 24, 8, 48, 16.
  CHECK(layout->offsets == std::vector<std::uint64_t>{0, 16, 40, 48, 96});
  CHECK(layout->total_bytes == 112);
  for (std::size_t i = 0; i < bytes_per_item.size(); ++i) {
    INFO("column " << i);
    CHECK(layout->offsets[i] % kColumnAlignment == 0);
    const std::uint64_t end = layout->offsets[i] + bytes_per_item[i] * items;
    const std::uint64_t next =
        i + 1 < bytes_per_item.size() ? layout->offsets[i + 1] : layout->total_bytes;
    CHECK(end <= next);                    // no overlap with the next column
    CHECK(next - end < kColumnAlignment);  // and no more padding than alignment needs
  }
}

TEST_CASE("a batch of zero items lays out as zero bytes") {
  auto layout = layout_columns(std::vector<std::uint64_t>{4, 8, 1}, 0);
  REQUIRE(layout.ok());
  CHECK(layout->offsets == std::vector<std::uint64_t>{0, 0, 0});
  CHECK(layout->total_bytes == 0);
}

TEST_CASE("align_column rounds up to the next multiple of the alignment") {
  CHECK(align_column(0) == 0);
  CHECK(align_column(1) == 8);
  CHECK(align_column(8) == 8);
  CHECK(align_column(9) == 16);
}

TEST_CASE("a batch whose column size overflows 64 bits is refused") {
  auto layout =
      layout_columns(std::vector<std::uint64_t>{1, std::uint64_t{1} << 33}, std::uint64_t{1} << 32);
  REQUIRE_FALSE(layout.ok());
  CHECK(layout.error().code == ErrorCode::invalid_argument);
}

TEST_CASE("a batch whose total size overflows 64 bits is refused, not wrapped around") {
  // Column 0 takes 2^64 - 9 bytes (padded to 2^64 - 8): a second column cannot fit.
  auto layout = layout_columns(std::vector<std::uint64_t>{1, 1}, UINT64_MAX - 8);
  REQUIRE_FALSE(layout.ok());
  CHECK(layout.error().code == ErrorCode::invalid_argument);
}

TEST_CASE("a layout either matches the exact 128-bit total or is refused near 2^64") {
  Rng rng(7);
  for (int trial = 0; trial < 20000; ++trial) {
    std::vector<std::uint64_t> bytes_per_item(1 + rng.uniform_below(4));
    uint128 exact = 0;
    uint128 unpadded = 0;
    for (auto& bytes : bytes_per_item) {
      bytes = rng.next() >> rng.uniform_below(4);  // mostly within a factor 8 of 2^64
      if (rng.uniform_below(4) == 0) bytes = rng.uniform_below(64);
      exact += (static_cast<uint128>(bytes) + 7) / 8 * 8;
      unpadded += bytes;
    }
    auto layout = layout_columns(bytes_per_item, 1);
    INFO("trial " << trial);
    if (layout.ok()) {
      REQUIRE(static_cast<uint128>(layout->total_bytes) == exact);
    } else {
      // Refusing is allowed only when padding could really push the total past 2^64 - 1.
      REQUIRE(unpadded + 8 * bytes_per_item.size() > UINT64_MAX);
    }
  }
}

TEST_CASE("a batch that fits just below 2^64 bytes is laid out") {
  auto layout = layout_columns(std::vector<std::uint64_t>{UINT64_MAX - 15}, 1);
  REQUIRE(layout.ok());
  CHECK(layout->total_bytes == UINT64_MAX - 15);
}

}  // namespace
}  // namespace replayd
