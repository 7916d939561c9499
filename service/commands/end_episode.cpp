// `end_episode` (docs/PROTOCOL.md): ends an open episode of this connection, terminated (no
// bootstrap past its last step) or truncated (a time limit). Its steps become sampleable as
// the windows that needed its end complete (docs/TRAJECTORIES.md). It waits behind the
// table's inserts and appends that arrived before it and wait for the rate limiter, so a
// writer may pipeline it after its appends: its episode's steps are all in when it runs.
#include "service/admission.h"
#include "service/commands/handlers.h"

namespace replayd::service::commands {
namespace {

class EndEpisodeWork final : public Deferred {
 public:
  EndEpisodeWork(std::shared_ptr<HostedTable> table, std::uint64_t request_id, std::uint64_t writer,
                 std::uint64_t episode, bool terminated)
      : table_(std::move(table)),
        request_id_(request_id),
        writer_(writer),
        episode_(episode),
        terminated_(terminated) {}

  WaitQueue& queue() override { return table_->insert_waiters; }
  bool ready() const override { return true; }  // once every earlier insert has run
  const HostedTable* table() const override { return table_.get(); }
  std::string why_not_ready() const override {
    return "inserts or appends that arrived before it still wait for the rate limiter";
  }
  Reply run() override {
    const auto how = terminated_ ? EpisodeEnd::terminated : EpisodeEnd::truncated;
    if (auto status = table_->table->end_episode(writer_, episode_, how); !status) {
      return make_error_reply(request_id_, status.error());
    }
    table_changed(*table_);
    return make_reply(request_id_, "{\"episode\":" + std::to_string(episode_) + "}");
  }

 private:
  std::shared_ptr<HostedTable> table_;
  std::uint64_t request_id_;
  std::uint64_t writer_;
  std::uint64_t episode_;
  bool terminated_;
};

}  // namespace

Result<Outcome> end_episode(Call& call) {
  Table& table = *call.table->table;
  if (!table.episodic()) {
    return make_error(
        ErrorCode::invalid_argument,
        "table '" + table.name() + "' is not episodic (create it with \"episodic\": true)");
  }
  REPLAYD_ASSIGN_OR_RETURN(std::uint64_t episode, call.args.uint("episode"));
  REPLAYD_ASSIGN_OR_RETURN(bool terminated, call.args.boolean_or("terminated", true));
  return Outcome(std::make_unique<EndEpisodeWork>(call.table, call.request_id, call.writer, episode,
                                                  terminated));
}

}  // namespace replayd::service::commands
