#include "service/snapshot_op.h"

#include <boost/json.hpp>

namespace replayd::service {
namespace json = boost::json;

Result<PreparedSnapshot> prepare_snapshot(ServiceContext& context, JsonReader& request) {
  REPLAYD_RETURN_IF_ERROR(request.finish());
  if (context.snapshots == nullptr || !context.snapshots->enabled()) {
    return make_error(ErrorCode::invalid_argument,
                      "snapshots are disabled: the server was started without a data directory "
                      "(data_dir in the config, or --data-dir)");
  }
  PreparedSnapshot prepared;
  prepared.run = context.snapshots->request();
  return prepared;
}

namespace {

Reply reply_of(std::uint64_t request_id, const SnapshotOutcome& outcome) {
  if (!outcome.status) {
    return make_error_reply(request_id, WireError::resource_exhausted,
                            "snapshot failed: " + outcome.status.error().message +
                                "; serving continues and earlier snapshots are kept");
  }
  return make_reply(request_id, json::serialize(json::object{
                                    {"file", outcome.path},
                                    {"tables", outcome.stats.tables},
                                    {"items", outcome.stats.items},
                                    {"bytes", outcome.stats.bytes},
                                    {"duration_ms", outcome.duration_ms},
                                    {"stall_ms", outcome.stall_ms},
                                }));
}

}  // namespace

asio::awaitable<std::optional<Reply>> await_snapshot(Snapshotter& snapshotter,
                                                     std::unordered_set<WaitQueue::Waiter*>& parked,
                                                     PreparedSnapshot snapshot) {
  auto executor = co_await asio::this_coro::executor;
  WaitQueue::Waiter waiter(snapshotter.finished(), executor);
  parked.insert(&waiter);
  std::optional<Reply> reply;
  while (true) {
    if (const SnapshotOutcome* outcome = snapshotter.outcome(snapshot.run)) {
      reply = reply_of(snapshot.request_id, *outcome);
      break;
    }
    if (co_await waiter.wait(std::nullopt) != WaitOutcome::cancelled) continue;
    if (waiter.cancel_reason() == CancelReason::shutting_down) {
      reply = make_error_reply(snapshot.request_id, WireError::shutting_down,
                               "the server is shutting down before this snapshot finished; it "
                               "writes a final snapshot before it exits");
    }
    break;  // connection_closed: no reply
  }
  waiter.leave();
  parked.erase(&waiter);
  co_return reply;
}

}  // namespace replayd::service
