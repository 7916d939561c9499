#include "replayd_client/episodes/episode_results.h"

#include <string>

namespace replayd::client {

ColumnView ColumnSet::column(std::string_view name, std::size_t first) const {
  for (std::size_t i = first; i < column_count(); ++i) {
    if (layout_->columns[i].name == name) return column(i);
  }
  throw Error(ErrorCode::invalid_argument, "the reply has no field '" + std::string(name) + "'");
}

}  // namespace replayd::client
