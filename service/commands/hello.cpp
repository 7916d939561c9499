// `hello`: protocol check and server facts (docs/PROTOCOL.md). The token of a connection that
// must authenticate is checked by the Session before any command runs. A client that asks
// ("shm": true) learns whether the shared-memory data plane is offered to this connection,
// and if not, why (docs/SHM.md).
#include <boost/json.hpp>

#include "service/commands/handlers.h"
#include "service/protocol/table_json.h"
#include "service/shm/connection_plane.h"

namespace replayd::service::commands {
namespace json = boost::json;

asio::awaitable<Result<Reply>> hello(Call& call) {
  REPLAYD_CO_ASSIGN_OR_RETURN(std::uint64_t protocol,
                              call.args.uint_or("protocol", kProtocolVersion));
  REPLAYD_CO_ASSIGN_OR_RETURN(auto client, call.args.optional_string("client"));
  (void)client;  // informational only
  REPLAYD_CO_ASSIGN_OR_RETURN(auto token, call.args.optional_string("token"));
  (void)token;
  REPLAYD_CO_ASSIGN_OR_RETURN(bool asks_shm, call.args.boolean_or("shm", false));
  if (protocol != kProtocolVersion) {
    co_return make_error(
        ErrorCode::invalid_argument,
        "protocol " + std::to_string(protocol) + " is not supported; this server speaks 1");
  }
  json::array names;
  for (const auto& hosted : call.service.tables.list())
    names.push_back(json::string(hosted->table->name()));
  json::object reply{{"protocol", kProtocolVersion},
                     {"server", std::string("replayd ") + kServerVersion},
                     {"tables", std::move(names)},
                     {"limits", limits_json(call.service.limits)}};
  if (asks_shm) {
    const shm::PlaneAccess access =
        call.plane != nullptr ? call.plane->access() : shm::PlaneAccess{false, "no connection"};
    json::object offer{{"offered", access.offered}};
    if (!access.offered) offer["reason"] = access.reason;
    reply["shm"] = std::move(offer);
  }
  co_return reply_with(call, json::serialize(reply));
}

}  // namespace replayd::service::commands
