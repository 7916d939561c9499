// The `snapshot` op (docs/PROTOCOL.md): asks the Snapshotter for a snapshot and answers when
// it is durable on disk, while the connection's other requests keep being served.
// Threading: io_context thread only.
#pragma once

#include <asio/awaitable.hpp>
#include <optional>
#include <unordered_set>

#include "service/dispatch.h"
#include "service/json_reader.h"
#include "service/snapshotter.h"

namespace replayd::service {

// Validates the request ({"op": "snapshot"}, no other key) and starts or joins the next run.
// Errors: invalid_argument when the server has no data_dir (snapshots disabled).
Result<PreparedSnapshot> prepare_snapshot(ServiceContext& context, JsonReader& request);

// Suspends (registered in `parked`, so the connection counts it as waiting and a closing
// connection cancels it) until the snapshot's run ends, then returns its reply: the file,
// counts and durations, or resource_exhausted naming why the write failed. shutting_down
// when the server stops first; nullopt (no reply) when the connection closed.
asio::awaitable<std::optional<Reply>> await_snapshot(Snapshotter& snapshotter,
                                                     std::unordered_set<WaitQueue::Waiter*>& parked,
                                                     PreparedSnapshot snapshot);

}  // namespace replayd::service
