// `snapshot` (docs/PROTOCOL.md, docs/SNAPSHOT.md): starts or joins the next snapshot run and
// answers when it is durable on disk, while the connection's other requests keep being served.
#include <boost/json.hpp>

#include "service/commands/handlers.h"
#include "service/snapshot/snapshotter.h"
#include "service/waiting/admission.h"

namespace replayd::service::commands {
namespace json = boost::json;

asio::awaitable<Result<Reply>> snapshot(Call& call) {
  Snapshotter* snapshots = call.service.snapshots;  // owned by the Server, outlives the wait
  if (snapshots == nullptr || !snapshots->enabled()) {
    co_return make_error(ErrorCode::invalid_argument,
                         "snapshots are disabled: the server was started without a data "
                         "directory (data_dir in the config, or --data-dir)");
  }
  const std::uint64_t run = snapshots->request();

  REPLAYD_CO_RETURN_IF_ERROR(co_await admit_when(
      call, snapshots->finished(), [&] { return snapshots->outcome(run) != nullptr; },
      "the snapshot has not finished", Order::any));

  const SnapshotOutcome& outcome = *snapshots->outcome(run);
  if (!outcome.status) {
    co_return make_error_reply(call.request_id, WireError::resource_exhausted,
                               "snapshot failed: " + outcome.status.error().message +
                                   "; serving continues and earlier snapshots are kept");
  }
  co_return make_reply(call.request_id, json::serialize(json::object{
                                            {"file", outcome.path},
                                            {"tables", outcome.stats.tables},
                                            {"items", outcome.stats.items},
                                            {"items_dropped", outcome.stats.items_dropped},
                                            {"bytes", outcome.stats.bytes},
                                            {"duration_ms", outcome.duration_ms},
                                            {"stall_ms", outcome.stall_ms},
                                        }));
}

}  // namespace replayd::service::commands
