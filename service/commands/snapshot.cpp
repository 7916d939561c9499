// `snapshot` (docs/PROTOCOL.md, docs/SNAPSHOT.md): starts or joins the next snapshot run and
// answers when it is durable on disk, while the connection's other requests keep being served.
#include <boost/json.hpp>

#include "service/commands/admission.h"
#include "service/commands/handlers.h"
#include "service/snapshot/snapshotter.h"

namespace replayd::service::commands {
namespace json = boost::json;
namespace {

class SnapshotWork final : public Deferred {
 public:
  SnapshotWork(Snapshotter& snapshots, std::uint64_t request_id, std::uint64_t run)
      : snapshots_(snapshots), request_id_(request_id), run_(run) {}

  WaitQueue& queue() override { return snapshots_.finished(); }
  bool in_order() const override { return false; }
  bool ready() const override { return snapshots_.outcome(run_) != nullptr; }
  std::string why_not_ready() const override { return "the snapshot has not finished"; }

  Reply run() override {
    const SnapshotOutcome& outcome = *snapshots_.outcome(run_);
    if (!outcome.status) {
      return make_error_reply(request_id_, WireError::resource_exhausted,
                              "snapshot failed: " + outcome.status.error().message +
                                  "; serving continues and earlier snapshots are kept");
    }
    return make_reply(request_id_, json::serialize(json::object{
                                       {"file", outcome.path},
                                       {"tables", outcome.stats.tables},
                                       {"items", outcome.stats.items},
                                       {"bytes", outcome.stats.bytes},
                                       {"duration_ms", outcome.duration_ms},
                                       {"stall_ms", outcome.stall_ms},
                                   }));
  }

 private:
  Snapshotter& snapshots_;  // owned by the Server, outlives every connection
  std::uint64_t request_id_;
  std::uint64_t run_;
};

}  // namespace

Result<Outcome> snapshot(Call& call) {
  Snapshotter* snapshots = call.service.snapshots;
  if (snapshots == nullptr || !snapshots->enabled()) {
    return make_error(ErrorCode::invalid_argument,
                      "snapshots are disabled: the server was started without a data directory "
                      "(data_dir in the config, or --data-dir)");
  }
  return Outcome(std::make_unique<SnapshotWork>(*snapshots, call.request_id, snapshots->request()));
}

}  // namespace replayd::service::commands
