// Tests of service/waiting/parking.h: a connection's waiting requests, counted against
// max_waiting_per_connection, with the bytes they hold (payload and kBytesPerParkedRequest
// each) reported to the connection,
// and all cancelled with the connection's reason when it closes.
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <optional>

#include "service/waiting/parking.h"

using namespace replayd;
using namespace replayd::service;
using Catch::Contains;

namespace {

// What Session does for its parked requests, recorded.
class RecordingConnection final : public Parking::Connection {
 public:
  void request_suspends() override { ++suspended; }
  void parked_bytes_changed(std::size_t held, bool parked) override {
    if (parked)
      parked_bytes += held;
    else
      parked_bytes -= held;
    ++changes;
  }
  int suspended = 0;
  int changes = 0;
  std::size_t parked_bytes = 0;
};

constexpr std::size_t kEach = Parking::kBytesPerParkedRequest;

}  // namespace

TEST_CASE("a parked request is counted with its bytes and told to the connection") {
  asio::io_context io;
  WaitQueue queue;
  RecordingConnection connection;
  Parking parking(connection, 4);
  CHECK(parking.empty());
  WaitQueue::Waiter a(queue, io.get_executor());
  WaitQueue::Waiter b(queue, io.get_executor());
  REQUIRE(parking.enter(a, 100));
  REQUIRE(parking.enter(b, 0));
  CHECK(parking.size() == 2);
  CHECK_FALSE(parking.empty());
  // A parked request holds its payload and its frames: many small ones count as much memory
  // as they take.
  CHECK(parking.held_bytes() == 100 + 2 * kEach);
  CHECK(connection.suspended == 2);
  CHECK(connection.parked_bytes == 100 + 2 * kEach);
  parking.leave(a, 100);
  CHECK(parking.size() == 1);
  CHECK(parking.held_bytes() == kEach);
  CHECK(connection.parked_bytes == kEach);
  parking.leave(b, 0);
  CHECK(parking.empty());
  CHECK(connection.changes == 4);
}

TEST_CASE("a request past max_waiting_per_connection is refused and nothing is parked") {
  asio::io_context io;
  WaitQueue queue;
  RecordingConnection connection;
  Parking parking(connection, 2);
  WaitQueue::Waiter a(queue, io.get_executor());
  WaitQueue::Waiter b(queue, io.get_executor());
  WaitQueue::Waiter c(queue, io.get_executor());
  REQUIRE(parking.enter(a, 10));
  REQUIRE(parking.enter(b, 20));
  auto refused = parking.enter(c, 30);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == ErrorCode::resource_exhausted);
  CHECK_THAT(refused.error().message,
             Contains("max_waiting_per_connection = 2") && Contains("waiting"));
  CHECK(parking.size() == 2);
  CHECK(parking.held_bytes() == 30 + 2 * kEach);
  CHECK(connection.suspended == 2);
  CHECK(connection.parked_bytes == 30 + 2 * kEach);
  parking.leave(a, 10);
  CHECK(parking.enter(c, 30).ok());  // room again once one leaves
  parking.leave(b, 20);
  parking.leave(c, 30);
}

TEST_CASE("a connection allowed no waiting requests refuses the first one") {
  asio::io_context io;
  WaitQueue queue;
  RecordingConnection connection;
  Parking parking(connection, 0);
  WaitQueue::Waiter a(queue, io.get_executor());
  auto refused = parking.enter(a, 1);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message, Contains("max_waiting_per_connection = 0"));
  CHECK(connection.suspended == 0);
  CHECK(connection.changes == 0);
}

TEST_CASE("cancel_all ends every parked wait with the connection's reason") {
  asio::io_context io;
  WaitQueue queue;
  RecordingConnection connection;
  Parking parking(connection, 8);
  std::optional<WaitOutcome> outcomes[2];
  std::optional<CancelReason> reasons[2];
  for (int i = 0; i < 2; ++i) {
    asio::co_spawn(
        io,
        [&, i]() -> asio::awaitable<void> {
          WaitQueue::Waiter waiter(queue, co_await asio::this_coro::executor);
          REQUIRE(parking.enter(waiter, 8));
          outcomes[i] = co_await waiter.wait(std::nullopt);
          reasons[i] = waiter.cancel_reason();
          parking.leave(waiter, 8);
        },
        asio::detached);
  }
  io.poll();
  CHECK(parking.size() == 2);
  CHECK(parking.held_bytes() == 16 + 2 * kEach);
  CHECK_FALSE(outcomes[0].has_value());
  parking.cancel_all(CancelReason::connection_closed);
  io.restart();
  io.poll();
  for (int i = 0; i < 2; ++i) {
    REQUIRE(outcomes[i].has_value());
    CHECK(*outcomes[i] == WaitOutcome::cancelled);
    CHECK(reasons[i] == CancelReason::connection_closed);
  }
  CHECK(parking.empty());
  CHECK(parking.held_bytes() == 0);
  CHECK(connection.parked_bytes == 0);
  CHECK(queue.empty());
}

TEST_CASE("cancel_all with nothing parked does nothing") {
  RecordingConnection connection;
  Parking parking(connection, 1);
  parking.cancel_all(CancelReason::shutting_down);
  CHECK(parking.empty());
  CHECK(connection.changes == 0);
}
