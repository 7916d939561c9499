// `reset_table` (docs/PROTOCOL.md): removes every item; keys stay unique.
#include "service/commands/handlers.h"

namespace replayd::service::commands {

asio::awaitable<Result<Reply>> reset_table(Call& call) {
  call.table->table->reset();
  table_changed(*call.table);
  co_return reply_with(call, "{}");
}

}  // namespace replayd::service::commands
