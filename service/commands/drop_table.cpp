// `drop_table` (docs/PROTOCOL.md): removes the table; its waiting requests end with not_found.
#include "service/commands/handlers.h"

namespace replayd::service::commands {

asio::awaitable<Result<Reply>> drop_table(Call& call) {
  call.service.tables.drop(call.table->table->name());
  co_return reply_with(call, "{}");
}

}  // namespace replayd::service::commands
