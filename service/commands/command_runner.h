// The command runner: turns one request frame into its reply, or into a Deferred that waits
// for admission. It parses the metadata, finds the command in the table, checks what the
// entry declares (known keys, payload, table, batch size, timeout) and runs the handler.
// The Session calls only this; no per-op logic lives outside the command table's handlers.
// Threading: io_context thread only. Never suspends.
#pragma once

#include <memory>
#include <variant>

#include "service/commands/admission.h"
#include "service/commands/command.h"
#include "service/protocol/wire_frame.h"
#include "service/protocol/reply.h"
#include "service/service_context.h"

namespace replayd::service {

// A request that must wait: its work and what its error replies name.
struct Waiting {
  std::unique_ptr<Deferred> work;
  WaitingRequest request;
};

struct Started {
  const Command* command = nullptr;  // nullptr: no readable op (metrics label "unknown")
  std::variant<Reply, Waiting> result;
};

// Runs the request in `frame` as far as it can without waiting: the reply, or (only when
// the command may wait and is not admitted now) the Waiting to park. `connection`: the
// sending connection's id (ServiceContext::open_connection), its writer identity for
// episodes. O(the handler).
Started start_command(ServiceContext& context, Frame frame, std::uint64_t connection);

}  // namespace replayd::service
