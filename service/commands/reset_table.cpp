// `reset_table` (docs/PROTOCOL.md): removes every item; keys stay unique.
#include "service/commands/handlers.h"

namespace replayd::service::commands {

Result<Outcome> reset_table(Call& call) {
  call.table->table->reset();
  table_changed(*call.table);
  return reply_with(call, "{}");
}

}  // namespace replayd::service::commands
