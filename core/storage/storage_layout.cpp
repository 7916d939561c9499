#include "core/storage/storage_layout.h"

namespace replayd {
namespace {

std::uint64_t round_up(std::uint64_t bytes) {
  return (bytes + StorageLayout::kAlignment - 1) / StorageLayout::kAlignment *
         StorageLayout::kAlignment;
}

}  // namespace

StorageLayout StorageLayout::of(const Schema& schema, std::uint32_t capacity) {
  StorageLayout layout;
  layout.stamps_offset = 0;
  std::uint64_t offset = round_up(std::uint64_t{capacity} * sizeof(std::uint64_t));
  for (const Field& field : schema.fields()) {
    if (field.compression != Compression::none) {
      layout.column_offsets.push_back(kNoColumn);
      continue;
    }
    layout.column_offsets.push_back(offset);
    offset += round_up(std::uint64_t{capacity} * field.item_bytes());
  }
  layout.total_bytes = offset;
  return layout;
}

}  // namespace replayd
