// `map_staging` and `unmap_staging` (docs/SHM.md): a connection's staging arenas, shared
// memory its writers fill with rows that a staged insert or append_steps then names. The
// arena's memfd (read-write, sealed against resizing) is the reply's one descriptor; the
// server keeps only its mapping.
#include <boost/json.hpp>

#include "service/commands/handlers.h"
#include "service/shm/connection_plane.h"

namespace replayd::service::commands {
namespace json = boost::json;

asio::awaitable<Result<Reply>> map_staging(Call& call) {
  if (call.plane == nullptr) {
    co_return make_error(ErrorCode::permission_denied, "map_staging needs a client connection");
  }
  REPLAYD_CO_ASSIGN_OR_RETURN(std::uint64_t bytes, call.args.uint("bytes"));
  REPLAYD_CO_RETURN_IF_ERROR(call.plane->require_offered("map_staging"));
  REPLAYD_CO_ASSIGN_OR_RETURN(auto hold, call.plane->hold_descriptor_reply());
  REPLAYD_CO_ASSIGN_OR_RETURN(shm::ArenaGrant grant, call.plane->create_arena(bytes));
  Reply reply =
      reply_with(call, json::serialize(json::object{
                           {"arena", grant.arena->id}, {"bytes", bytes}, {"descriptors", 1}}));
  reply.descriptors.push_back(std::move(grant.fd));
  reply.descriptor_hold = std::move(hold);
  co_return reply;
}

asio::awaitable<Result<Reply>> unmap_staging(Call& call) {
  if (call.plane == nullptr) {
    co_return make_error(ErrorCode::permission_denied, "unmap_staging needs a client connection");
  }
  REPLAYD_CO_ASSIGN_OR_RETURN(std::uint64_t arena, call.args.uint("arena"));
  if (!call.plane->release_arena(arena)) {
    co_return call.args.error("arena",
                              "this connection has no staging arena " + std::to_string(arena));
  }
  co_return reply_with(call, "{\"arena\":" + std::to_string(arena) + "}");
}

}  // namespace replayd::service::commands
