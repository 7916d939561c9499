// Column layout of a batch on the wire and in buffers: for N items, each column's N values
// are contiguous, and every column starts at an offset that is a multiple of
// kColumnAlignment bytes, so a reader can view any column in place (numpy.frombuffer).
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/result.h"

namespace replayd {

inline constexpr std::uint64_t kColumnAlignment = 8;

struct ColumnLayout {
  std::vector<std::uint64_t> offsets;  // byte offset of each column from the batch start
  std::uint64_t total_bytes = 0;       // including padding after the last column
};

// Rounds up to the next multiple of kColumnAlignment.
constexpr std::uint64_t align_column(std::uint64_t bytes) {
  return (bytes + kColumnAlignment - 1) / kColumnAlignment * kColumnAlignment;
}

// Lays out columns of `items` values each, where column i holds bytes_per_item[i] bytes per
// value. Fails (invalid_argument) only if the total would overflow 64 bits.
Result<ColumnLayout> layout_columns(std::span<const std::uint64_t> bytes_per_item,
                                    std::uint64_t items);

}  // namespace replayd
