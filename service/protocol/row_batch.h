// A batch of rows in a request payload, as `insert` and `append_steps` send them
// (docs/PROTOCOL.md, "insert"): the schema's fields as columns (column_decoding.h), then for
// `append_steps` one uint64 episode id per row, then optionally one float64 priority per
// row, then optionally one uint64 policy version per row ("versions": true; or "version": V
// for every row, docs/VERSIONS.md), then the final observations of the episodes it ends
// ("final_columns"). Decoding checks every column against the schema and the payload's size before
// anything is stored. Staged (docs/SHM.md): the field columns lie in one of the connection's
// staging arenas instead ("staged": {"arena", "offset", "rows"}), laid out as in a payload of
// `rows` rows
// (>= n; the first n are the batch's). The episode ids and priorities are copied out of
// the arena before anything checks them, so a client changing them meanwhile changes
// nothing the server relies on; field values are data, copied into the table as they are.
// Ownership: a RowBatch owns the request payload (or the copied ids and priorities, and a
// reference that keeps the arena mapped); its spans stay valid as long as the RowBatch
// lives (moving it keeps them valid: the bytes do not move).
// Threading: none (pure decoding).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "service/protocol/byte_buffer.h"
#include "service/protocol/column_decoding.h"
#include "service/protocol/json_reader.h"
#include "service/protocol/staged_payload.h"

namespace replayd::service::commands {

struct RowBatch {
  ByteBuffer payload;                  // the frame's; for a staged batch, ids and priorities
  std::shared_ptr<const void> staged;  // a staged batch's arena, kept mapped
  std::uint64_t n = 0;
  ColumnViews rows;
  ColumnViews finals;                             // the ended episodes' final observations
  std::span<const std::uint64_t> episodes;        // append_steps: one episode id per row
  std::span<const double> priorities;             // empty: the table's default priority
  std::span<const std::uint64_t> version_column;  // "versions": one per row
  std::optional<std::uint64_t> version;           // "version": every row's
  // What Table::insert takes: one version per row, one for all, or none (version 0).
  std::span<const std::uint64_t> versions() const {
    if (version) return {&*version, 1};
    return version_column;
  }
};

// Decodes `args` ("columns", "priorities", "version", "versions", "final_columns", "staged") for n
// rows of `table` and takes `payload`. `with_episodes`: the rows carry episode ids (append_steps).
// `ends`: how many episodes the append ends (rows of "final_columns"). `staging`: the connection's
// arenas (null: none). Errors: invalid_argument naming the column or size at fault,
// permission_denied for a staged batch on a connection without the plane; `payload` is left
// untouched on error.
Result<RowBatch> decode_row_batch(JsonReader& args, const Table& table, std::uint64_t n,
                                  ByteBuffer& payload, bool with_episodes, std::uint64_t ends = 0,
                                  const StagingLookup* staging = nullptr);

}  // namespace replayd::service::commands
