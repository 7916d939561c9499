#include "service/protocol/batch_layout.h"

namespace replayd {

Result<ColumnLayout> layout_columns(std::span<const std::uint64_t> bytes_per_item,
                                    std::uint64_t items) {
  ColumnLayout layout;
  layout.offsets.reserve(bytes_per_item.size());
  std::uint64_t offset = 0;
  for (auto item_bytes : bytes_per_item) {
    std::uint64_t column_bytes = 0;
    if (__builtin_mul_overflow(item_bytes, items, &column_bytes) ||
        column_bytes > UINT64_MAX - offset - (kColumnAlignment - 1)) {
      return make_error(ErrorCode::invalid_argument,
                        "batch of " + std::to_string(items) + " items is too large to lay out");
    }
    layout.offsets.push_back(offset);
    offset += align_column(column_bytes);
  }
  layout.total_bytes = offset;
  return layout;
}

}  // namespace replayd
