// `delete` (docs/PROTOCOL.md): payload of n uint64 keys; keys no longer stored are counted as
// stale and ignored.
#include "service/commands/handlers.h"

namespace replayd::service::commands {

asio::awaitable<Result<Reply>> delete_keys(Call& call) {
  const std::uint64_t n = call.n;
  const ByteBuffer& payload = call.frame.payload;
  if (payload.size() != 8 * n) {
    co_return make_error(ErrorCode::invalid_argument,
                         "table '" + call.table->table->name() + "': payload holds " +
                             std::to_string(payload.size()) + " bytes, " + std::to_string(n) +
                             " keys need " + std::to_string(8 * n));
  }
  const DeleteOutcome outcome = call.table->table->delete_keys({payload.as<std::uint64_t>(0), n});
  table_changed(*call.table);
  co_return reply_with(call, "{\"deleted\":" + std::to_string(outcome.deleted) +
                                 ",\"stale\":" + std::to_string(outcome.stale) + "}");
}

}  // namespace replayd::service::commands
