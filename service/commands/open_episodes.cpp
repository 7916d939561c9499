// `open_episodes` (docs/PROTOCOL.md): opens n new empty episodes of an episodic table for
// this connection, their writer, and returns their ids. Episodes a connection leaves open
// end as truncated when it closes.
#include "service/commands/handlers.h"

namespace replayd::service::commands {

asio::awaitable<Result<Reply>> open_episodes(Call& call) {
  Table& table = *call.table->table;
  EpisodicTable& episodic = call.episodic();
  const std::size_t open = episodic.episodes().open_count();
  if (open + call.n > EpisodicTable::kMaxOpenEpisodes) {
    co_return make_error(
        ErrorCode::resource_exhausted,
        "table '" + table.name() + "': " + std::to_string(open) + " episodes are open; opening " +
            std::to_string(call.n) + " more would exceed the limit of " +
            std::to_string(EpisodicTable::kMaxOpenEpisodes) + " (end episodes first)");
  }
  const std::size_t mine = episodic.episodes().open_count_of(call.writer);
  const std::uint32_t quota = call.service.limits.max_open_episodes_per_connection;
  if (mine + call.n > quota) {
    co_return make_error(
        ErrorCode::resource_exhausted,
        "table '" + table.name() + "': this connection has " + std::to_string(mine) +
            " open episodes; opening " + std::to_string(call.n) +
            " more would exceed max_open_episodes_per_connection = " + std::to_string(quota) +
            " (end episodes first)");
  }
  std::string ids;
  for (std::uint64_t i = 0; i < call.n; ++i) {
    REPLAYD_CO_ASSIGN_OR_RETURN(std::uint64_t id, episodic.open_episode(call.writer));
    if (i > 0) ids += ',';
    ids += std::to_string(id);
  }
  co_return reply_with(call, "{\"episodes\":[" + ids + "]}");
}

}  // namespace replayd::service::commands
