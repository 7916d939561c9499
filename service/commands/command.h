// Command: one entry of the command table (service/commands/command_table.cpp), and what its handler
// receives and returns. The table is the one list of the protocol's operations: the runner
// looks commands up in it, the metrics label requests by its index, and a test checks
// docs/PROTOCOL.md and both clients against it.
// Threading: io_context thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <variant>

#include "core/result.h"
#include "service/commands/admission.h"
#include "service/protocol/wire_frame.h"
#include "service/protocol/json_reader.h"
#include "service/protocol/reply.h"
#include "service/service_context.h"

namespace replayd::service {

class Deferred;  // service/commands/admission.h

// One request as a handler sees it. Everything the entry declares has been checked before
// the handler runs: the op is known, no key outside `fields` is present, the table exists
// (needs_table), `n` is within max_batch_items (batch), timeout_ms is well formed (waits).
struct Call {
  ServiceContext& service;
  std::uint64_t request_id = 0;
  JsonReader& args;  // the request's metadata (strict: reading marks a key as known)
  Frame& frame;      // the whole request; a Deferred may take its payload by moving it
  std::shared_ptr<HostedTable> table;                // the named table, when the command needs one
  std::uint64_t n = 0;                               // items, when the command takes a batch
  std::optional<std::chrono::milliseconds> timeout;  // when it may wait; nullopt: no limit
  // The connection, as the writer of episodes (Table::open_episode); unique for the
  // server's lifetime, never 0.
  std::uint64_t writer = 0;
};

// A handler's result: the reply now, or work that runs once admitted (service/commands/admission.h).
using Outcome = std::variant<Reply, std::unique_ptr<Deferred>>;
// Decodes the request, acts on the table, returns the reply. An Error becomes an error reply
// (its code mapped once, in service/protocol/reply.cpp). Never suspends.
using Handler = Result<Outcome> (*)(Call& call);

// What a command may wait on before it runs.
enum class WaitsOn : std::uint8_t {
  nothing,
  rate_limiter,     // the table's rate limiter and min size; in arrival order per table
  snapshot,         // the end of a snapshot run
  earlier_inserts,  // the table's inserts and appends that arrived before it and wait
};

// Who typically sends it, for scheduling (docs/ARCHITECTURE.md, "Scheduling"): a connection
// that sends learner commands is protected from connections that send explorer commands.
enum class Lane : std::uint8_t { control, explorer, learner };

struct Command {
  std::string_view name;  // the wire op
  Handler handler;
  // Metadata keys it reads besides "op"; any other key is rejected before the handler runs.
  std::span<const std::string_view> fields;
  bool needs_table = false;    // "table" names an existing table, found before the handler
  bool batch = false;          // "n" (1 .. limits.max_batch_items) is read before the handler
  bool takes_payload = false;  // a request without this flag must carry no payload
  WaitsOn waits_on = WaitsOn::nothing;
  Lane lane = Lane::control;
};

}  // namespace replayd::service
