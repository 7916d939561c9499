#include "replayd_client/results.h"

namespace replayd::client {

ColumnView SampleBatch::field(std::string_view name) const {
  if (layout_) {
    const std::size_t end = layout_->columns.size() - layout_->trailing_columns();
    for (std::size_t i = 4; i < end; ++i) {
      if (layout_->columns[i].name == name) return column(i);
    }
  }
  throw Error(ErrorCode::invalid_argument, "the sample has no field '" + std::string(name) + "'");
}

}  // namespace replayd::client
