// `end_episode` (docs/PROTOCOL.md): ends an open episode of this connection, terminated (no
// bootstrap past its last step) or truncated (a time limit). Its steps become sampleable as
// the windows that needed its end complete (docs/TRAJECTORIES.md). It waits behind the
// table's inserts and appends that arrived before it and wait for the rate limiter, so a
// writer may pipeline it after its appends: its episode's steps are all in when it runs.
// In a table with next_of fields it may carry the final observation (docs/PIXELS.md): the
// next_of fields' values as "columns" of one row, in the payload.
#include "service/commands/admission.h"
#include "service/protocol/column_decoding.h"
#include "service/commands/handlers.h"

namespace replayd::service::commands {
namespace {

class EndEpisodeWork final : public Deferred {
 public:
  EndEpisodeWork(std::shared_ptr<HostedTable> table, std::uint64_t request_id, std::uint64_t writer,
                 std::uint64_t episode, bool terminated, ByteBuffer payload)
      : table_(std::move(table)),
        request_id_(request_id),
        writer_(writer),
        episode_(episode),
        terminated_(terminated),
        payload_(std::move(payload)) {}

  // The final observation's values, viewing this work's payload.
  void set_final(std::vector<std::span<const std::byte>> values) {
    final_values_ = std::move(values);
  }
  std::span<const std::byte> payload() const { return payload_.span(); }
  std::size_t held_bytes() const override { return payload_.size(); }

  WaitQueue& queue() override { return table_->insert_waiters; }
  bool ready() const override { return true; }  // once every earlier insert has run
  const HostedTable* table() const override { return table_.get(); }
  std::string why_not_ready() const override {
    return "inserts or appends that arrived before it still wait for the rate limiter";
  }
  Reply run() override {
    const auto how = terminated_ ? EpisodeEnd::terminated : EpisodeEnd::truncated;
    if (auto status = table_->table->end_episode(writer_, episode_, how, final_values_); !status) {
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
  ByteBuffer payload_;
  std::vector<std::span<const std::byte>> final_values_;
};

// Decodes the final observation ("columns": the next_of fields, one row) into `work`.
Status decode_final(Call& call, const Table& table, EndEpisodeWork& work) {
  const boost::json::value* columns = call.args.value("columns");
  const auto fields = next_of_fields(table.schema());
  if (fields.empty()) {
    return call.args.error("columns", "table '" + table.name() +
                                          "' has no next_of field: an end carries no observation");
  }
  if (!columns->is_array() || columns->get_array().size() != fields.size()) {
    return call.args.error("columns",
                           "expected one column per next_of field, in the table's order");
  }
  std::vector<std::uint64_t> column_bytes;
  REPLAYD_ASSIGN_OR_RETURN(auto encodings,
                           decode_columns(columns->get_array(), fields, table, 1, column_bytes));
  REPLAYD_ASSIGN_OR_RETURN(ColumnLayout layout, layout_columns(column_bytes, 1));
  if (layout.total_bytes != work.payload().size()) {
    return make_error(ErrorCode::invalid_argument, "table '" + table.name() + "': payload holds " +
                                                       std::to_string(work.payload().size()) +
                                                       " bytes, the columns need " +
                                                       std::to_string(layout.total_bytes));
  }
  ColumnViews views;
  view_columns(work.payload(), layout, 0, encodings, table.schema(), 1, views);
  work.set_final(row_values(views, table.schema(), 0));
  return Ok{};
}

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
  auto work = std::make_unique<EndEpisodeWork>(call.table, call.request_id, call.writer, episode,
                                               terminated, std::move(call.frame.payload));
  const boost::json::value* columns = call.args.value("columns");
  if (columns && !columns->is_null()) {
    REPLAYD_RETURN_IF_ERROR(decode_final(call, table, *work));
  } else if (!work->payload().empty()) {
    return make_error(ErrorCode::invalid_argument, "table '" + table.name() +
                                                       "': end_episode carries a payload but no "
                                                       "\"columns\" describing it");
  }
  return Outcome(std::unique_ptr<Deferred>(std::move(work)));
}

}  // namespace replayd::service::commands
