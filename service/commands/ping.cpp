// `ping`: an empty reply (docs/PROTOCOL.md).
#include "service/commands/handlers.h"

namespace replayd::service::commands {

asio::awaitable<Result<Reply>> ping(Call& call) {
  co_return reply_with(call, "{}");
}

}  // namespace replayd::service::commands
