#include "replayd_client/results.h"

namespace replayd::client {

ColumnView SampleBatch::field(std::string_view name) const {
  if (layout_) {
    for (std::size_t i = 4; i < layout_->columns.size(); ++i) {
      if (layout_->columns[i].name == name) return column(i);
    }
  }
  throw Error(ErrorCode::invalid_argument, "the sample has no field '" + std::string(name) + "'");
}

}  // namespace replayd::client
