// `read_steps` (docs/PROTOCOL.md): one page of the stored steps of an episodic table in
// insertion order, after a cursor. A page holds at most n steps and never more than fits in
// max_frame_bytes; a client reads everything by passing the returned `next` until a page is
// empty. Not rate limited and never waits.
#include <algorithm>

#include "service/commands/handlers.h"
#include "service/commands/sample_reply.h"

namespace replayd::service::commands {
namespace {

// Room left for the metadata of a page when sizing it against max_frame_bytes.
constexpr std::uint64_t kPageMetaBytes = 64 * 1024;

std::vector<ReplyColumn> step_columns(const Schema& schema) {
  std::vector<ReplyColumn> columns{{"key", "uint64", {}, 8, {}},
                                   {"episode", "uint64", {}, 8, {}},
                                   {"position", "uint32", {}, 4, {}},
                                   {"sequence", "uint64", {}, 8, {}}};
  for (const auto& field : schema.fields()) {
    columns.push_back({field.name,
                       std::string(dtype_name(field.dtype)),
                       {field.shape.begin(), field.shape.end()},
                       field.item_bytes(),
                       {}});
  }
  return columns;
}

// Reads up to `rows` steps after `after` into a reply of exactly that many rows.
Result<ColumnReply> read_page(const Table& table, std::uint64_t after, std::uint64_t rows,
                              std::uint64_t& got) {
  REPLAYD_ASSIGN_OR_RETURN(ColumnReply page,
                           ColumnReply::create(step_columns(table.schema()), {rows}));
  got = 0;
  if (rows == 0) return page;
  std::vector<std::span<std::byte>> columns;
  for (std::size_t f = 0; f < table.schema().size(); ++f)
    columns.push_back(page.column(4 + f));
  StepBuffers buffers{page.as<std::uint64_t>(0), page.as<std::uint64_t>(1),
                      page.as<std::uint32_t>(2), page.as<std::uint64_t>(3), columns};
  REPLAYD_ASSIGN_OR_RETURN(got, table.read_steps(after, buffers));
  return page;
}

}  // namespace

Result<Outcome> read_steps(Call& call) {
  const Table& table = *call.table->table;
  if (!table.episodic()) {
    return make_error(
        ErrorCode::invalid_argument,
        "table '" + table.name() + "' is not episodic (create it with \"episodic\": true)");
  }
  REPLAYD_ASSIGN_OR_RETURN(std::uint64_t after, call.args.uint_or("after", 0));
  const auto columns = step_columns(table.schema());
  std::uint64_t row_bytes = 0;
  for (const auto& column : columns)
    row_bytes += column.item_bytes;
  const std::uint64_t limit = call.service.limits.max_frame_bytes;
  const std::uint64_t overhead = kHeaderBytes + kPageMetaBytes + 8 * columns.size();
  const std::uint64_t fit = limit > overhead ? (limit - overhead) / row_bytes : 0;
  if (fit == 0) {
    return make_error(
        ErrorCode::resource_exhausted,
        "table '" + table.name() + "': one step is " + std::to_string(row_bytes) +
            " bytes; a page of steps does not fit in max_frame_bytes = " + std::to_string(limit));
  }
  const std::uint64_t rows = std::min({call.n, fit, std::uint64_t{table.size()}});
  std::uint64_t got = 0;
  REPLAYD_ASSIGN_OR_RETURN(ColumnReply page, read_page(table, after, rows, got));
  if (got < rows) {
    // The last page: read again into a reply of exactly the rows there are.
    const std::uint64_t last = got;
    REPLAYD_ASSIGN_OR_RETURN(page, read_page(table, after, last, got));
  }
  std::uint64_t next = after;
  if (got > 0) next = page.as<std::uint64_t>(3)[got - 1];
  return Outcome(page.finish(call.request_id, ",\"next\":" + std::to_string(next)));
}

}  // namespace replayd::service::commands
