// The reply of a `sample` (docs/PROTOCOL.md): four per-draw columns (key, probability,
// weight, times_sampled) then the table's fields, the table state the draws saw in the
// metadata. Large fields are viewed in place: the Reply borrows table rows (see Reply).
// Threading: io_context thread only.
#pragma once

#include <cstdint>

#include "service/reply.h"
#include "service/table_registry.h"

namespace replayd::service::commands {

// Bytes of the reply frame of a sample of n items from `table` (header and payload; the
// metadata's few hundred bytes are not counted). Used to refuse a sample whose reply would
// exceed max_frame_bytes before drawing.
std::uint64_t sample_reply_bytes(const Table& table, std::uint64_t n);

// Draws n items and encodes the reply (or the table's error). Precondition: the table admits
// a sample of n now.
Reply sample_and_encode(HostedTable& hosted, std::uint64_t request_id, std::uint64_t n,
                        double beta);

}  // namespace replayd::service::commands
