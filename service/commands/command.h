// Command: one entry of the command table (service/commands/command_table.cpp), and what its
// handler receives and returns. The table is the one list of the protocol's operations: the
// dispatcher looks commands up in it, the metrics label requests by its index, and a test
// checks docs/PROTOCOL.md and both clients against it.
// Threading: io_context thread only.
#pragma once

#include <asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "core/result.h"
#include "core/table/episodic_table.h"
#include "service/protocol/json_reader.h"
#include "service/protocol/reply.h"
#include "service/protocol/wire_frame.h"
#include "service/service_context.h"
#include "service/waiting/parking.h"

namespace replayd::service {

namespace shm {
class ConnectionPlane;
}

// One request as a handler sees it. Everything the entry declares has been checked before
// the handler runs: the op is known, no key outside `fields` is present, the table exists
// (needs_table), `n` is within max_batch_items (batch), timeout_ms is well formed (waits).
// Lifetime: lives in the dispatcher's coroutine frame until the handler returns, across
// any suspension of the handler.
struct Call {
  ServiceContext& service;
  std::uint64_t request_id = 0;
  std::string_view op;       // the command's wire name
  std::size_t op_index = 0;  // its index in the command table (metrics label)
  JsonReader& args;          // the request's metadata (strict: reading marks a key as known)
  WireFrame& frame;          // the whole request; a handler may take its payload by moving it
  std::shared_ptr<HostedTable> table;                // the named table, when the command needs one
  std::uint64_t n = 0;                               // items, when the command takes a batch
  std::optional<std::chrono::milliseconds> timeout;  // when it may wait; nullopt: no limit
  // The connection, as the writer of episodes (Table::open_episode); unique for the
  // server's lifetime, never 0.
  std::uint64_t writer = 0;
  // The connection's parked requests: admission parks this request here while it waits.
  Parking& parking;
  // The connection's side of the shared-memory data plane (service/shm/connection_plane.h);
  // null where there is no connection (unit tests of handlers).
  shm::ConnectionPlane* plane = nullptr;
  // False once the connection closed while the request waited: its reply is dropped.
  bool reply_wanted = true;
  // Bytes the request moved through shared memory rather than the socket (a staged
  // insert's rows, the rows a keys-only sample names), which the scheduler counts as the
  // connection's work as it counts socket bytes (service/scheduler.h). Set by handlers.
  std::uint64_t shared_bytes = 0;

  // The table's episodic part. Precondition: the command declares TableKind::episodic, or
  // the handler checked with require_episodic (service/commands/table_kind.h).
  EpisodicTable& episodic() const { return *table->table->episodic(); }
};

// A handler: decodes the request, co_awaits admission when the operation may wait, acts on
// the table and returns the reply. An Error becomes an error reply (its code mapped once,
// in service/protocol/reply.cpp). Suspends only in admission (service/waiting/admission.h);
// a request admitted at once runs to its reply without suspending, so a reply that borrows
// table rows goes out before any other handler touches the table.
using Handler = asio::awaitable<Result<Reply>> (*)(Call& call);

// Which tables a command works on; dispatch refuses the others before the handler runs.
enum class TableKind : std::uint8_t {
  any,
  items,     // an item table (episodic tables are written with episodes)
  episodic,  // a table with an episodic part (Call::episodic())
};

// What a command may wait on before it acts.
enum class WaitsOn : std::uint8_t {
  nothing,
  rate_limiter,     // the table's rate limiter and min size; in arrival order per table
  snapshot,         // the end of a snapshot run
  earlier_inserts,  // the table's inserts and appends that arrived before it and wait
  value,            // a newer version of a published value
};

struct Command {
  std::string_view name;  // the wire op
  Handler handler = nullptr;
  // Metadata keys it reads besides "op"; any other key is rejected before the handler runs.
  std::span<const std::string_view> fields;
  bool needs_table = false;  // "table" names an existing table, found before the handler
  TableKind table_kind = TableKind::any;  // with needs_table: the kind of table it works on
  bool batch = false;          // "n" (1 .. limits.max_batch_items) is read before the handler
  bool takes_payload = false;  // a request without this flag must carry no payload
  WaitsOn waits_on = WaitsOn::nothing;
  Lane lane = Lane::control;  // for scheduling (service/scheduler.h)
};

}  // namespace replayd::service

// In a handler (a coroutine returning Result<...>): unwraps a Result into `lhs` or co_returns
// its Error; co_returns the Error of a failed Status.
#define REPLAYD_CO_ASSIGN_OR_RETURN(lhs, expr)                   \
  auto REPLAYD_CONCAT(replayd_result_, __LINE__) = (expr);       \
  if (!REPLAYD_CONCAT(replayd_result_, __LINE__)) {              \
    co_return REPLAYD_CONCAT(replayd_result_, __LINE__).error(); \
  }                                                              \
  lhs = std::move(REPLAYD_CONCAT(replayd_result_, __LINE__)).value()
#define REPLAYD_CO_RETURN_IF_ERROR(expr)                   \
  do {                                                     \
    if (auto replayd_status_ = (expr); !replayd_status_) { \
      co_return replayd_status_.error();                   \
    }                                                      \
  } while (0)
