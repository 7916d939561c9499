// Dispatch: turns one request frame into its reply. It parses the metadata, finds the
// command in the table, checks what the entry declares (known keys, payload, table, batch
// size, timeout) and co_awaits the handler. The Session calls only this; no per-op logic
// lives outside the command table's handlers.
// Threading: io_context thread only. Suspends only while the handler waits for admission;
// a request admitted at once completes without suspending.
#pragma once

#include <asio/awaitable.hpp>
#include <cstdint>
#include <optional>

#include "service/commands/command.h"
#include "service/protocol/reply.h"
#include "service/protocol/wire_frame.h"
#include "service/service_context.h"
#include "service/waiting/parking.h"

namespace replayd::service {

// The connection a request came on, as dispatch needs it.
struct RequestOrigin {
  std::uint64_t writer = 0;  // the connection's id (ServiceContext::next_connection_id)
  Parking& parking;          // its parked requests
  // Called once the command is known, before its handler runs (the scheduler's lanes).
  void (*on_command)(void* connection, const Command& command) = nullptr;
  void* connection = nullptr;
  shm::ConnectionPlane* plane = nullptr;  // its shared-memory plane (null in unit tests)
};

struct Dispatched {
  std::size_t op = 0;              // metrics label index (the command's, or unknown_op)
  std::optional<Reply> reply;      // nullopt: the connection closed while the request waited
  std::uint64_t shared_bytes = 0;  // Call::shared_bytes
};

// Runs the request in `frame` to its reply. Errors of any step become error replies.
asio::awaitable<Dispatched> dispatch(ServiceContext& context, WireFrame frame,
                                     RequestOrigin origin);

}  // namespace replayd::service
