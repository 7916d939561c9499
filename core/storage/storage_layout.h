// StorageLayout: where a Storage's per-slot stamps and fixed-size columns lie in its one
// block of ColumnMemory. Clients that map the block read it with this layout
// (docs/SHM.md, "map_table"), so it is part of the protocol: stamps first (one u64 per
// slot), then each uncompressed field's column (capacity * item bytes) in field order,
// every part starting on a page boundary. Compressed fields have no column in the block.
#pragma once

#include <cstdint>
#include <vector>

#include "core/schema.h"

namespace replayd {

struct StorageLayout {
  static constexpr std::uint64_t kAlignment = 4096;       // bytes, a page
  static constexpr std::uint64_t kNoColumn = UINT64_MAX;  // a compressed field's offset
  std::uint64_t stamps_offset = 0;                        // capacity u64 stamps
  std::vector<std::uint64_t> column_offsets;              // per field; kNoColumn if compressed
  std::uint64_t total_bytes = 0;                          // of the whole block, page multiple

  // The layout of `schema` at `capacity` slots. Precondition: the configuration passed
  // validate_table_config (so no size overflows 64 bits). O(fields).
  static StorageLayout of(const Schema& schema, std::uint32_t capacity);
};

}  // namespace replayd
