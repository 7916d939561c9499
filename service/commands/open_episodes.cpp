// `open_episodes` (docs/PROTOCOL.md): opens n new empty episodes of an episodic table for
// this connection, their writer, and returns their ids. Episodes a connection leaves open
// end as truncated when it closes.
#include "service/commands/handlers.h"

namespace replayd::service::commands {

asio::awaitable<Result<Reply>> open_episodes(Call& call) {
  Table& table = *call.table->table;
  if (!table.episodic()) {
    co_return make_error(
        ErrorCode::invalid_argument,
        "table '" + table.name() + "' is not episodic (create it with \"episodic\": true)");
  }
  const std::size_t open = table.episodes()->open_count();
  if (open + call.n > Table::kMaxOpenEpisodes) {
    co_return make_error(ErrorCode::resource_exhausted,
                         "table '" + table.name() + "': " + std::to_string(open) +
                             " episodes are open; opening " + std::to_string(call.n) +
                             " more would exceed the limit of " +
                             std::to_string(Table::kMaxOpenEpisodes) + " (end episodes first)");
  }
  std::string ids;
  for (std::uint64_t i = 0; i < call.n; ++i) {
    REPLAYD_CO_ASSIGN_OR_RETURN(std::uint64_t id, table.open_episode(call.writer));
    if (i > 0) ids += ',';
    ids += std::to_string(id);
  }
  co_return reply_with(call, "{\"episodes\":[" + ids + "]}");
}

}  // namespace replayd::service::commands
