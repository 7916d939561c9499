// `ping`: an empty reply (docs/PROTOCOL.md).
#include "service/commands/handlers.h"

namespace replayd::service::commands {

Result<Outcome> ping(Call& call) {
  return reply_with(call, "{}");
}

}  // namespace replayd::service::commands
