// Request dispatch: turns one request frame into either a finished Reply or a prepared
// insert/sample that the session executes now or after waiting. Handlers translate JSON and
// columns into Table calls; the Table decides. Nothing here suspends or touches a socket.
// Threading: io_context thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <variant>
#include <vector>

#include "metrics/request_op.h"
#include "service/frame.h"
#include "service/reply.h"
#include "service/service_context.h"

namespace replayd::service {

// An insert whose input is fully validated; it owns the request frame its column spans view.
struct PreparedInsert {
  std::uint64_t request_id = 0;
  std::shared_ptr<HostedTable> table;
  std::uint64_t n = 0;
  std::optional<std::chrono::milliseconds> timeout;  // nullopt: wait without limit
  Frame frame;
  std::vector<std::span<const std::byte>> columns;
  std::span<const double> priorities;
  std::chrono::steady_clock::time_point received_at;  // when read (request latency metric)
};

struct PreparedSample {
  std::uint64_t request_id = 0;
  std::shared_ptr<HostedTable> table;
  std::uint64_t n = 0;
  double beta = 0.4;
  std::optional<std::chrono::milliseconds> timeout;
  std::chrono::steady_clock::time_point received_at;  // when read (request latency metric)
};

// A snapshot request: the reply comes when run `run` of the Snapshotter ends.
struct PreparedSnapshot {
  std::uint64_t request_id = 0;
  std::uint64_t run = 0;
};

using Dispatched = std::variant<Reply, PreparedInsert, PreparedSample, PreparedSnapshot>;

// Parses and validates a request; executes every op that never waits.
// When `op` is given, *op receives the request's op (RequestOp::unknown when none is readable).
Dispatched dispatch(ServiceContext& context, Frame frame, metrics::RequestOp* op = nullptr);

// Execute a prepared request. Precondition: the table admits it now (may_insert/may_sample).
// After either, call table_changed() so waiters re-check.
Reply execute_insert(PreparedInsert& insert);
Reply execute_sample(PreparedSample& sample);

// Wakes the front waiter of each of the table's queues (admission may have changed).
void table_changed(HostedTable& table);

}  // namespace replayd::service
