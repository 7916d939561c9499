// The reply of a `sample` (docs/PROTOCOL.md): four per-draw columns (key, probability,
// weight, times_sampled) then the table's fields, the table state the draws saw in the
// metadata. Large fields are viewed in place: the Reply borrows table rows (see Reply).
// Threading: io_context thread only.
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"
#include "core/schema.h"
#include "core/table_config.h"
#include "service/reply.h"
#include "service/table_registry.h"

namespace replayd::service::commands {

// Bytes of the reply frame of a sample of n items from `table` (header and payload; the
// metadata's few hundred bytes are not counted). Used to refuse a sample whose reply would
// exceed max_frame_bytes before drawing.
std::uint64_t sample_reply_bytes(const Table& table, std::uint64_t n);
std::uint64_t sample_reply_bytes(const Schema& schema, std::uint64_t n);

// Checks that one item of the table `config` describes fits in a frame of `max_frame_bytes`:
// an insert of one item (header, the shortest metadata a client can send, the item's padded
// columns) and the reply to a sample of one item (header, its metadata at its longest, the
// per-draw and field columns). Otherwise the table could be created but never filled or
// never sampled: invalid_argument naming the item's size, the frame's and the limit,
// prefixed by `where` (e.g. "table 'replay'"). Cost: O(fields), two small JSON texts.
Status check_item_fits_frames(const TableConfig& config, std::uint64_t max_frame_bytes,
                              const std::string& where);

// Draws n items and encodes the reply (or the table's error). Precondition: the table admits
// a sample of n now.
Reply sample_and_encode(HostedTable& hosted, std::uint64_t request_id, std::uint64_t n,
                        double beta);

}  // namespace replayd::service::commands
