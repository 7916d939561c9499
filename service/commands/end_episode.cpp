// `end_episode` (docs/PROTOCOL.md): ends an open episode of this connection, terminated (no
// bootstrap past its last step) or truncated (a time limit). Its steps become sampleable as
// the windows that needed its end complete (docs/TRAJECTORIES.md). It waits behind the
// table's inserts and appends that arrived before it and wait for the rate limiter, so a
// writer may pipeline it after its appends: its episode's steps are all in when it runs.
// In a table with next_of fields it may carry the final observation (docs/PIXELS.md): the
// next_of fields' values as "columns" of one row, in the payload.
#include "service/commands/handlers.h"
#include "service/protocol/column_decoding.h"
#include "service/waiting/admission.h"

namespace replayd::service::commands {
namespace {

// Decodes the final observation ("columns": the next_of fields, one row, in `payload`).
Result<std::vector<std::span<const std::byte>>> decode_final(Call& call, const Table& table,
                                                             std::span<const std::byte> payload) {
  const boost::json::value* columns = call.args.value("columns");
  const auto fields = next_of_fields(table.schema());
  if (fields.empty()) {
    return call.args.error("columns", "table '" + table.name() +
                                          "' has no next_of field: an end carries no observation");
  }
  if (!columns->is_array() || columns->get_array().size() != fields.size()) {
    return call.args.error("columns",
                           "expected one column per next_of field, in the table's order");
  }
  std::vector<std::uint64_t> column_bytes;
  REPLAYD_ASSIGN_OR_RETURN(auto encodings,
                           decode_columns(columns->get_array(), fields, table, 1, column_bytes));
  REPLAYD_ASSIGN_OR_RETURN(ColumnLayout layout, layout_columns(column_bytes, 1));
  if (layout.total_bytes != payload.size()) {
    return make_error(ErrorCode::invalid_argument, "table '" + table.name() + "': payload holds " +
                                                       std::to_string(payload.size()) +
                                                       " bytes, the columns need " +
                                                       std::to_string(layout.total_bytes));
  }
  ColumnViews views;
  view_columns(payload, layout, 0, encodings, table.schema(), 1, views);
  return row_values(views, table.schema(), 0);
}

}  // namespace

asio::awaitable<Result<Reply>> end_episode(Call& call) {
  Table& table = *call.table->table;
  EpisodicTable& episodic = call.episodic();
  REPLAYD_CO_ASSIGN_OR_RETURN(std::uint64_t episode, call.args.uint("episode"));
  REPLAYD_CO_ASSIGN_OR_RETURN(bool terminated, call.args.boolean_or("terminated", true));
  const ByteBuffer payload = std::move(call.frame.payload);  // the final values view it
  std::vector<std::span<const std::byte>> final_values;
  const boost::json::value* columns = call.args.value("columns");
  if (columns && !columns->is_null()) {
    REPLAYD_CO_ASSIGN_OR_RETURN(final_values, decode_final(call, table, payload.span()));
  } else if (payload.size() > 0) {
    co_return make_error(ErrorCode::invalid_argument,
                         "table '" + table.name() +
                             "': end_episode carries a payload but no \"columns\" describing it");
  }

  REPLAYD_CO_RETURN_IF_ERROR(co_await admit_when(
      call, call.table->insert_waiters, [] { return true; },
      "inserts or appends that arrived before it still wait for the rate limiter", Order::arrival,
      payload.size()));

  const auto how = terminated ? EpisodeEnd::terminated : EpisodeEnd::truncated;
  table.set_now_ms(replay_now_ms());
  REPLAYD_CO_RETURN_IF_ERROR(episodic.end_episode(call.writer, episode, how, final_values));
  table_changed(*call.table);
  co_return make_reply(call.request_id, "{\"episode\":" + std::to_string(episode) + "}");
}

}  // namespace replayd::service::commands
