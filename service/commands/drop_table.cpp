// `drop_table` (docs/PROTOCOL.md): removes the table; its waiting requests end with not_found.
// Its shared-memory block, if connections were sent it (map_table), may stay mapped in their
// processes: it counts in the plane's dropped_table_bytes_mapped until they close.
#include "service/commands/handlers.h"
#include "service/shm/shared_columns.h"

namespace replayd::service::commands {

asio::awaitable<Result<Reply>> drop_table(Call& call) {
  if (const auto* shared = shm::shared_columns_of(call.table->table->storage().memory()))
    call.service.plane.block_dropped(shared->id());
  call.service.tables.drop(call.table->table->name());
  co_return reply_with(call, "{}");
}

}  // namespace replayd::service::commands
