// `end_episode` (docs/PROTOCOL.md): ends an open episode of this connection, terminated (no
// bootstrap past its last step) or truncated (a time limit). Its steps become sampleable as
// the windows that needed its end complete (docs/TRAJECTORIES.md).
#include "service/commands/handlers.h"

namespace replayd::service::commands {

Result<Outcome> end_episode(Call& call) {
  Table& table = *call.table->table;
  if (!table.episodic()) {
    return make_error(
        ErrorCode::invalid_argument,
        "table '" + table.name() + "' is not episodic (create it with \"episodic\": true)");
  }
  REPLAYD_ASSIGN_OR_RETURN(std::uint64_t episode, call.args.uint("episode"));
  REPLAYD_ASSIGN_OR_RETURN(bool terminated, call.args.boolean_or("terminated", true));
  REPLAYD_RETURN_IF_ERROR(table.end_episode(
      call.writer, episode, terminated ? EpisodeEnd::terminated : EpisodeEnd::truncated));
  table_changed(*call.table);
  return reply_with(call, "{\"episode\":" + std::to_string(episode) + "}");
}

}  // namespace replayd::service::commands
