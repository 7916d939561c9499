// `append_steps` (docs/PROTOCOL.md): n steps of open episodes of this connection, as columns
// in the payload like `insert`, followed by one uint64 episode id per row; runs once the
// rate limiter admits it, in arrival order behind the table's earlier inserts and appends. "end"
// lists episodes to end right after these steps are stored (what `end_episode` does, without a
// request of its own). The connection is the writer: its open episodes end as truncated when it
// closes (docs/TRAJECTORIES.md).
#include "service/commands/handlers.h"
#include "service/protocol/row_batch.h"
#include "service/shm/connection_plane.h"
#include "service/waiting/admission.h"

namespace replayd::service::commands {
namespace {

// An episode an append ends once its steps are stored.
struct EpisodeEnding {
  std::uint64_t episode = 0;
  bool terminated = true;
};

// Decodes "end": [{"episode": id, "terminated": bool}, ...] (absent: none). At most
// kMaxEnds entries, checked before anything is allocated.
Result<std::vector<EpisodeEnding>> decode_ends(Call& call) {
  constexpr std::size_t kMaxEnds = 65536;
  std::vector<EpisodeEnding> ends;
  const boost::json::value* list = call.args.value("end");
  if (list == nullptr || list->is_null()) return ends;
  if (!list->is_array()) return call.args.error("end", "expected an array of episode ends");
  const auto& array = list->get_array();
  if (array.size() > kMaxEnds) {
    return call.args.error("end", "lists " + std::to_string(array.size()) + " episodes, at most " +
                                      std::to_string(kMaxEnds));
  }
  ends.reserve(array.size());
  for (std::size_t i = 0; i < array.size(); ++i) {
    REPLAYD_ASSIGN_OR_RETURN(auto entry, JsonReader::of(array[i], call.args.path_of("end") + "[" +
                                                                      std::to_string(i) + "]"));
    REPLAYD_ASSIGN_OR_RETURN(std::uint64_t episode, entry.uint("episode"));
    REPLAYD_ASSIGN_OR_RETURN(bool terminated, entry.boolean_or("terminated", true));
    REPLAYD_RETURN_IF_ERROR(entry.finish());
    ends.push_back({episode, terminated});
  }
  return ends;
}

}  // namespace

asio::awaitable<Result<Reply>> append_steps(Call& call) {
  Table& table = *call.table->table;
  EpisodicTable& episodic = call.episodic();
  REPLAYD_CO_ASSIGN_OR_RETURN(auto ends, decode_ends(call));
  REPLAYD_CO_ASSIGN_OR_RETURN(RowBatch batch,
                              decode_row_batch(call.args, table, call.n, call.frame.payload, true,
                                               ends.size(), call.plane));

  REPLAYD_CO_RETURN_IF_ERROR(co_await admit_when(
      call, call.table->insert_waiters, [&] { return table.may_insert(call.n); },
      "the rate limiter does not admit this append now", Order::arrival, batch.payload.size()));

  ByteBuffer keys(call.n * sizeof(std::uint64_t));
  table.set_now_ms(replay_now_ms());
  REPLAYD_CO_RETURN_IF_ERROR(episodic.append_steps(
      call.writer, batch.episodes, batch.rows.values, call.n, batch.priorities,
      {keys.as<std::uint64_t>(0), call.n}, batch.rows.frame_sizes, batch.versions()));
  if (batch.staged) call.shared_bytes = call.n * table.schema().item_bytes();
  for (std::size_t e = 0; e < ends.size(); ++e) {
    const auto how = ends[e].terminated ? EpisodeEnd::terminated : EpisodeEnd::truncated;
    std::vector<std::span<const std::byte>> final_values;
    if (!batch.finals.values.empty()) final_values = row_values(batch.finals, table.schema(), e);
    if (auto ended = episodic.end_episode(call.writer, ends[e].episode, how, final_values);
        !ended) {
      table_changed(*call.table);
      co_return make_error(
          ended.error().code,
          "the " + std::to_string(call.n) +
              " steps were stored, but ending an episode failed: " + ended.error().message);
    }
  }
  table_changed(*call.table);
  co_return make_reply(call.request_id, "{\"n\":" + std::to_string(call.n) + "}", std::move(keys));
}

}  // namespace replayd::service::commands
