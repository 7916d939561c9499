// Runs one request through service/commands/dispatch.h without a socket, for unit tests and
// the request fuzzer: the reply of a request that completes without waiting, or nothing for
// one that would park (it is cancelled as if its connection closed, so nothing stays
// queued on a table).
#pragma once

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <optional>

#include "service/commands/dispatch.h"

namespace replayd::service::testing {

// A connection that only counts: what Session does for its parked requests, minus reading.
class CountingConnection final : public Parking::Connection {
 public:
  void request_suspends() override { ++suspended; }
  void parked_bytes_changed(std::size_t held, bool parked) override {
    parked_bytes += parked ? held : -held;
  }
  std::size_t suspended = 0;
  std::size_t parked_bytes = 0;
};

// Runs dispatch and keeps what it returned (a named coroutine: its frame owns its arguments).
inline asio::awaitable<void> dispatch_into(ServiceContext& context, WireFrame frame,
                                           RequestOrigin origin, std::optional<Dispatched>& done) {
  done = co_await dispatch(context, std::move(frame), origin);
}

// The reply to `frame`, or nullopt when the request would wait. `writer`: the connection id;
// `plane`: the connection's shared-memory side (null: none).
inline std::optional<Reply> run_request(ServiceContext& context, WireFrame frame,
                                        std::uint64_t writer = 1,
                                        shm::ConnectionPlane* plane = nullptr) {
  asio::io_context io;
  CountingConnection connection;
  Parking parking(connection, context.limits.max_waiting_per_connection);
  std::optional<Dispatched> done;
  asio::co_spawn(io,
                 dispatch_into(context, std::move(frame),
                               RequestOrigin{writer, parking, nullptr, nullptr, plane}, done),
                 [](std::exception_ptr error) {
                   if (error) std::rethrow_exception(error);
                 });
  io.poll();
  if (connection.suspended > 0) {
    parking.cancel_all(CancelReason::connection_closed);
    io.restart();
    io.poll();
    return std::nullopt;
  }
  return done ? std::move(done->reply) : std::nullopt;
}

}  // namespace replayd::service::testing
