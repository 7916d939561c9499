// `insert` (docs/PROTOCOL.md): n items as columns in the payload, checked against the table's
// schema before anything is stored; runs once the rate limiter admits it.
#include "service/commands/handlers.h"
#include "service/commands/row_batch.h"

namespace replayd::service::commands {

Result<Outcome> insert(Call& call) {
  if (call.table->table->episodic()) {
    return make_error(ErrorCode::invalid_argument,
                      "table '" + call.table->table->name() +
                          "' is episodic: write it with open_episodes, append_steps and "
                          "end_episode");
  }
  REPLAYD_ASSIGN_OR_RETURN(auto work, RowBatchWork::decode(call, std::nullopt));
  return Outcome(std::unique_ptr<Deferred>(std::move(work)));
}

}  // namespace replayd::service::commands
