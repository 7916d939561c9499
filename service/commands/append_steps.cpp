// `append_steps` (docs/PROTOCOL.md): n steps of open episodes of this connection, as columns
// in the payload like `insert`, followed by one uint64 episode id per row; runs once the
// rate limiter admits it. "end" lists episodes to end right after these steps are stored
// (what `end_episode` does, without a request of its own). The connection is the writer:
// its open episodes end as truncated when it closes (docs/TRAJECTORIES.md).
#include "service/commands/handlers.h"
#include "service/commands/row_batch.h"

namespace replayd::service::commands {
namespace {

// Decodes "end": [{"episode": id, "terminated": bool}, ...] (absent: none). At most
// kMaxEnds entries, checked before anything is allocated.
Result<std::vector<EpisodeEnding>> decode_ends(Call& call) {
  constexpr std::size_t kMaxEnds = 65536;
  std::vector<EpisodeEnding> ends;
  const boost::json::value* list = call.args.value("end");
  if (list == nullptr || list->is_null()) return ends;
  if (!list->is_array()) return call.args.error("end", "expected an array of episode ends");
  const auto& array = list->get_array();
  if (array.size() > kMaxEnds) {
    return call.args.error("end", "lists " + std::to_string(array.size()) + " episodes, at most " +
                                      std::to_string(kMaxEnds));
  }
  ends.reserve(array.size());
  for (std::size_t i = 0; i < array.size(); ++i) {
    REPLAYD_ASSIGN_OR_RETURN(auto entry, JsonReader::of(array[i], call.args.path_of("end") + "[" +
                                                                      std::to_string(i) + "]"));
    REPLAYD_ASSIGN_OR_RETURN(std::uint64_t episode, entry.uint("episode"));
    REPLAYD_ASSIGN_OR_RETURN(bool terminated, entry.boolean_or("terminated", true));
    REPLAYD_RETURN_IF_ERROR(entry.finish());
    ends.push_back({episode, terminated});
  }
  return ends;
}

}  // namespace

Result<Outcome> append_steps(Call& call) {
  if (!call.table->table->episodic()) {
    return make_error(ErrorCode::invalid_argument,
                      "table '" + call.table->table->name() +
                          "' is not episodic: append_steps needs a table created with "
                          "\"episodic\": true (use insert)");
  }
  REPLAYD_ASSIGN_OR_RETURN(auto ends, decode_ends(call));
  REPLAYD_ASSIGN_OR_RETURN(auto work, RowBatchWork::decode(call, call.writer, ends.size()));
  work->end_after(std::move(ends));
  return Outcome(std::unique_ptr<Deferred>(std::move(work)));
}

}  // namespace replayd::service::commands
