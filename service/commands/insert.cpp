// `insert` (docs/PROTOCOL.md): n items as columns in the payload, checked against the table's
// schema before anything is stored; stored once the rate limiter admits them, in arrival
// order behind the table's earlier inserts. Replies {"n"} and the new keys.
#include "service/commands/handlers.h"
#include "service/protocol/row_batch.h"
#include "service/shm/connection_plane.h"
#include "service/waiting/admission.h"

namespace replayd::service::commands {

asio::awaitable<Result<Reply>> insert(Call& call) {
  Table& table = *call.table->table;
  REPLAYD_CO_ASSIGN_OR_RETURN(
      RowBatch batch,
      decode_row_batch(call.args, table, call.n, call.frame.payload, false, 0, call.plane));

  REPLAYD_CO_RETURN_IF_ERROR(co_await admit_when(
      call, call.table->insert_waiters, [&] { return table.may_insert(call.n); },
      "the rate limiter does not admit this insert now", Order::arrival, batch.payload.size()));

  ByteBuffer keys(call.n * sizeof(std::uint64_t));
  table.set_now_ms(replay_now_ms());
  REPLAYD_CO_RETURN_IF_ERROR(table.insert(batch.rows.values, call.n, batch.priorities,
                                          {keys.as<std::uint64_t>(0), call.n}, batch.versions()));
  if (batch.staged) call.shared_bytes = call.n * table.schema().item_bytes();
  table_changed(*call.table);
  co_return make_reply(call.request_id, "{\"n\":" + std::to_string(call.n) + "}", std::move(keys));
}

}  // namespace replayd::service::commands
