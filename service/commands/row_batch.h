// A batch of rows in a request payload, as `insert` and `append_steps` send them
// (docs/PROTOCOL.md, "insert"): the schema's fields as columns (column_decoding.h), then for
// `append_steps` one uint64 episode id per row, then optionally one float64 priority per
// row, then the final observations of the episodes it ends ("final_columns"). Decoding checks
// every column against the schema and the payload's size before anything is stored; the work
// owns the payload and stores the rows once the rate limiter admits them.
// Threading: io_context thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "service/commands/admission.h"
#include "service/commands/command.h"
#include "service/protocol/column_decoding.h"

namespace replayd::service::commands {

// An episode an append ends once its steps are stored.
struct EpisodeEnding {
  std::uint64_t episode = 0;
  bool terminated = true;
};

// The rows of one insert or append, owning the request payload its spans view.
class RowBatchWork final : public Deferred {
 public:
  // Decodes call.args ("columns", "priorities", "final_columns") and takes
  // call.frame.payload. `writer`: the episode writer of an append (the connection), whose
  // rows carry episode ids; nullopt for an insert. `ends`: how many episodes the append ends
  // (rows of "final_columns"). Errors: invalid_argument naming the column or size at fault.
  static Result<std::unique_ptr<RowBatchWork>> decode(Call& call,
                                                      std::optional<std::uint64_t> writer,
                                                      std::uint64_t ends = 0);

  WaitQueue& queue() override { return table_->insert_waiters; }
  bool ready() const override { return table_->table->may_insert(n_); }
  const HostedTable* table() const override { return table_.get(); }
  std::size_t held_bytes() const override { return payload_.size(); }
  std::string why_not_ready() const override;
  // Stores the rows (Table::insert or Table::append_steps), then ends the episodes of
  // end_after; replies {"n"} and the new keys. An end that fails leaves the rows stored and
  // makes the reply an error that says so.
  Reply run() override;
  // Episodes (of this append's writer) to end right after its rows are stored.
  void end_after(std::vector<EpisodeEnding> ends) { ends_ = std::move(ends); }

 private:
  RowBatchWork(std::shared_ptr<HostedTable> table, std::uint64_t request_id, std::uint64_t n,
               ByteBuffer payload, std::optional<std::uint64_t> writer)
      : table_(std::move(table)),
        request_id_(request_id),
        n_(n),
        payload_(std::move(payload)),
        writer_(writer) {}

  std::shared_ptr<HostedTable> table_;
  std::uint64_t request_id_;
  std::uint64_t n_;
  ByteBuffer payload_;
  std::optional<std::uint64_t> writer_;
  ColumnViews rows_;
  ColumnViews finals_;  // the ended episodes' final observations, one row per end
  std::span<const std::uint64_t> episodes_;
  std::span<const double> priorities_;
  std::vector<EpisodeEnding> ends_;
};

}  // namespace replayd::service::commands
