// `append_steps` (docs/PROTOCOL.md): n steps of open episodes of this connection, as columns
// in the payload like `insert`, followed by one uint64 episode id per row; runs once the
// rate limiter admits it. The connection is the writer: its open episodes end as truncated
// when it closes (docs/TRAJECTORIES.md).
#include "service/commands/handlers.h"
#include "service/commands/row_batch.h"

namespace replayd::service::commands {

Result<Outcome> append_steps(Call& call) {
  if (!call.table->table->episodic()) {
    return make_error(ErrorCode::invalid_argument,
                      "table '" + call.table->table->name() +
                          "' is not episodic: append_steps needs a table created with "
                          "\"episodic\": true (use insert)");
  }
  REPLAYD_ASSIGN_OR_RETURN(auto work, RowBatchWork::decode(call, call.writer));
  return Outcome(std::unique_ptr<Deferred>(std::move(work)));
}

}  // namespace replayd::service::commands
