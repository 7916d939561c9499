// `update_priorities` (docs/PROTOCOL.md): payload of n uint64 keys then n float64 priorities;
// keys no longer stored are counted as stale and ignored.
#include "service/commands/handlers.h"

namespace replayd::service::commands {

asio::awaitable<Result<Reply>> update_priorities(Call& call) {
  const std::uint64_t n = call.n;
  const ByteBuffer& payload = call.frame.payload;
  if (payload.size() != 16 * n) {
    co_return make_error(ErrorCode::invalid_argument,
                         "table '" + call.table->table->name() + "': payload holds " +
                             std::to_string(payload.size()) + " bytes, " + std::to_string(n) +
                             " keys and priorities need " + std::to_string(16 * n));
  }
  REPLAYD_CO_ASSIGN_OR_RETURN(
      UpdateOutcome outcome, call.table->table->update_priorities({payload.as<std::uint64_t>(0), n},
                                                                  {payload.as<double>(8 * n), n}));
  co_return reply_with(call, "{\"applied\":" + std::to_string(outcome.applied) +
                                 ",\"stale\":" + std::to_string(outcome.stale) + "}");
}

}  // namespace replayd::service::commands
