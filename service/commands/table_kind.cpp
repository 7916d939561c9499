#include "service/commands/table_kind.h"

#include <string>

namespace replayd::service {

Status check_table_kind(const Table& table, TableKind kind, std::string_view op) {
  const bool episodic = table.episodic() != nullptr;
  if (kind == TableKind::episodic && !episodic) {
    return make_error(ErrorCode::invalid_argument,
                      "table '" + table.name() + "' is not episodic: " + std::string(op) +
                          " needs a table created with \"episodic\": true");
  }
  if (kind == TableKind::items && episodic) {
    return make_error(ErrorCode::invalid_argument,
                      "table '" + table.name() + "' is episodic: write it with open_episodes, " +
                          "append_steps and end_episode");
  }
  return Ok{};
}

}  // namespace replayd::service
