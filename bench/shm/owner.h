// The owner's side of one connection: the single thread that holds the table answers one
// client's requests in order until it sends `stop` or disconnects. It stands in for the
// server's io_context thread (pinned to its own core by the caller).
#pragma once

#include <cstddef>

#include "reply_ring.h"
#include "shared_table.h"

namespace replayd::shm_proto {

struct ServeOptions {
  // Items the owner overwrites (FIFO, seqlock protocol) after each sample request, as
  // explorers inserting at 1/`churn` of the sample rate would; 0 for a quiet table.
  std::size_t churn_rows_per_sample = 0;
  int writer_id = 1;  // whose reservations this connection holds
  // This connection's staging area (staging_rows items, fields one after another), mapped
  // by the owner and this client only; null when the client has none.
  const std::byte* staging = nullptr;
  std::size_t staging_rows = 0;
};

struct ServeStats {
  std::size_t requests = 0;
  std::size_t commits_refused = 0;         // slots not reserved by this writer
  std::size_t reservations_released = 0;   // at disconnect
};

// Serves `sock` until stop or end of stream. `ring` may be null (no sample_ring then).
// Throws std::runtime_error on a malformed request or a socket error.
ServeStats serve(int sock, OwnerTable& table, const ReplyRing* ring, const ServeOptions& options);

}  // namespace replayd::shm_proto
