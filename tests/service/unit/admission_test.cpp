// Tests of service/waiting/admission.h: the one awaitable every waiting request uses: admission in
// arrival order, deadlines, cancellation (connection closed, table dropped, server stopping).
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <boost/json.hpp>
#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/table/table.h"
#include "service/waiting/admission.h"
#include "tests/support/run_request.h"

using namespace replayd::service;
using namespace std::chrono_literals;

namespace {

// A connection's side of admission: a context, a parking lot and the requests' calls.
struct Connection {
  ServiceContext service;
  testing::CountingConnection counting;
  Parking parking{counting, 1024};
  WireFrame frame;
  boost::json::value meta = boost::json::object{};
  JsonReader args = JsonReader::of(meta, "").value();
};

struct Outcome {
  bool done = false;
  std::optional<Reply> reply;
};

// A request `id` of `op` that waits in `queue` until `open`, then records that it ran, as a
// handler does between admission and its reply.
asio::awaitable<void> request(Connection& connection, WaitQueue& queue, const bool& open,
                              std::vector<int>& ran, int id, std::string_view op,
                              std::optional<std::chrono::milliseconds> timeout, Outcome& outcome,
                              std::shared_ptr<HostedTable> table = nullptr,
                              Order order = Order::arrival) {
  Call call{connection.service,
            static_cast<std::uint64_t>(id),
            op,
            0,
            connection.args,
            connection.frame,
            std::move(table),
            1,
            timeout,
            1,
            connection.parking};
  const replayd::Status admitted = co_await admit_when(
      call, queue, [&] { return open; }, "the gate is closed", order);
  outcome.done = true;
  if (!call.reply_wanted) co_return;
  if (!admitted) {
    outcome.reply = make_error_reply(call.request_id, admitted.error());
    co_return;
  }
  ran.push_back(id);
  outcome.reply = make_reply(call.request_id, "{}");
}

// A request `id` that waits in `queue` until `open`, parked in `parking`.
asio::awaitable<void> wait_in(Connection& connection, Parking& parking, WaitQueue& queue,
                              const bool& open, int id, Outcome& outcome) {
  Call call{connection.service,
            static_cast<std::uint64_t>(id),
            "sample",
            0,
            connection.args,
            connection.frame,
            nullptr,
            1,
            std::nullopt,
            1,
            parking};
  const replayd::Status admitted = co_await admit_when(
      call, queue, [&] { return open; }, "closed");
  outcome.done = true;
  if (!admitted) outcome.reply = make_error_reply(call.request_id, admitted.error());
}

void spawn(asio::io_context& io, asio::awaitable<void> waiting) {
  asio::co_spawn(io, std::move(waiting), [](std::exception_ptr error) { REQUIRE_FALSE(error); });
}

// Runs the io_context for `duration` (restarting it: it stops whenever it runs out of work).
void run(asio::io_context& io, std::chrono::milliseconds duration) {
  io.restart();
  io.run_for(duration);
}

std::string error_code_of(const Outcome& outcome) {
  return outcome.reply ? std::string(outcome.reply->error_code) : "no reply";
}

}  // namespace

TEST_CASE("work that is ready with nobody ahead is admitted at once; otherwise it waits") {
  asio::io_context io;
  Connection connection;
  WaitQueue queue;
  bool open = true;
  std::vector<int> ran;
  Outcome now, refused;
  spawn(io, request(connection, queue, open, ran, 1, "sample", std::nullopt, now));
  run(io, 1ms);
  CHECK(now.done);
  CHECK(connection.counting.suspended == 0);  // admitted without suspending
  open = false;
  spawn(io, request(connection, queue, open, ran, 7, "sample", 0ms, refused));
  run(io, 1ms);
  REQUIRE(refused.reply);
  CHECK(refused.reply->error_code == "timeout");
  CHECK(refused.reply->meta.find("the gate is closed, and timeout_ms is 0") != std::string::npos);
  CHECK(connection.counting.suspended == 0);
}

TEST_CASE("waiters are admitted in arrival order, each once its condition holds") {
  asio::io_context io;
  Connection connection;
  WaitQueue queue;
  bool open = false;
  std::vector<int> ran;
  Outcome a, b, c;
  spawn(io, request(connection, queue, open, ran, 1, "insert", std::nullopt, a));
  spawn(io, request(connection, queue, open, ran, 2, "insert", std::nullopt, b));
  spawn(io, request(connection, queue, open, ran, 3, "insert", std::nullopt, c));
  run(io, 20ms);
  CHECK(connection.parking.size() == 3);
  CHECK(ran.empty());
  // Opening the gate and waking only the front runs them one after another, in order.
  open = true;
  queue.wake_front();
  run(io, 20ms);
  CHECK_FALSE(b.done);  // each admitted waiter must wake the next (table_changed does)
  CHECK(ran == std::vector<int>{1});
  queue.wake_front();
  run(io, 5ms);
  queue.wake_front();
  run(io, 5ms);
  CHECK(ran == std::vector<int>{1, 2, 3});
  CHECK(a.reply->request_id == 1);
  CHECK(connection.parking.empty());
}

TEST_CASE("a later waiter never overtakes the front, even when only it could run") {
  asio::io_context io;
  Connection connection;
  WaitQueue queue;
  bool front_open = false, back_open = true;
  std::vector<int> ran;
  Outcome a, b;
  spawn(io, request(connection, queue, front_open, ran, 1, "sample", 30ms, a));
  spawn(io, request(connection, queue, back_open, ran, 2, "sample", std::nullopt, b));
  queue.wake_all();
  run(io, 10ms);
  CHECK(ran.empty());
  // The front times out; leaving, it wakes the next, which then runs.
  run(io, 100ms);
  CHECK(error_code_of(a) == "timeout");
  CHECK(a.reply->meta.find("sample was not admitted within timeout_ms = 30") != std::string::npos);
  CHECK(ran == std::vector<int>{2});
}

TEST_CASE("a closed connection ends the wait without a reply; a stopping server answers") {
  asio::io_context io;
  Connection connection;
  WaitQueue queue;
  bool open = false;
  std::vector<int> ran;
  Outcome a, b;
  spawn(io, request(connection, queue, open, ran, 1, "insert", std::nullopt, a));
  run(io, 5ms);
  connection.parking.cancel_all(CancelReason::connection_closed);
  run(io, 5ms);
  CHECK(a.done);
  CHECK_FALSE(a.reply);
  spawn(io, request(connection, queue, open, ran, 2, "insert", std::nullopt, b));
  run(io, 5ms);
  queue.cancel_all(CancelReason::shutting_down);
  run(io, 5ms);
  CHECK(error_code_of(b) == "shutting_down");
  CHECK(ran.empty());
  CHECK(connection.parking.empty());
  CHECK(queue.empty());
}

TEST_CASE("dropping the table ends its waiters with not_found naming the table") {
  asio::io_context io;
  Connection connection;
  replayd::TableConfig config;
  config.name = std::string("dropped_one");
  config.schema =
      replayd::Schema::create({replayd::Field{"x", replayd::DType::float32, {}}}).value();
  config.capacity = 8;
  TableRegistry registry;
  auto hosted = registry.add(replayd::Table::create(config).value());
  bool open = false;
  std::vector<int> ran;
  Outcome outcome;
  spawn(io, request(connection, hosted->sample_waiters, open, ran, 1, "sample", std::nullopt,
                    outcome, hosted));
  run(io, 5ms);
  registry.drop("dropped_one");
  open = true;
  run(io, 5ms);
  CHECK(error_code_of(outcome) == "not_found");
  CHECK(outcome.reply->meta.find("table 'dropped_one' was dropped while the sample waited") !=
        std::string::npos);
  CHECK(ran.empty());
  // A request on the dropped table is never admitted, even when its condition holds.
  Outcome late;
  spawn(io, request(connection, hosted->sample_waiters, open, ran, 2, "sample", 0ms, late, hosted));
  run(io, 5ms);
  CHECK(error_code_of(late) == "timeout");
  CHECK(ran.empty());
}

TEST_CASE("work that is not in order runs as soon as it is ready") {
  asio::io_context io;
  Connection connection;
  WaitQueue queue;
  bool closed = false, open = false;
  std::vector<int> ran;
  Outcome a, b;
  spawn(io, request(connection, queue, closed, ran, 1, "insert", std::nullopt, a));
  spawn(io,
        request(connection, queue, open, ran, 9, "snapshot", std::nullopt, b, nullptr, Order::any));
  run(io, 5ms);
  open = true;
  queue.wake_all();
  run(io, 5ms);
  REQUIRE(b.reply);
  CHECK(b.reply->meta == "{}");
  CHECK(ran == std::vector<int>{9});
  CHECK_FALSE(a.done);
  queue.cancel_all(CancelReason::shutting_down);
  run(io, 5ms);
}

TEST_CASE("a connection may park at most max_waiting_per_connection requests") {
  asio::io_context io;
  Connection connection;
  Parking small{connection.counting, 2};
  WaitQueue queue;
  bool open = false;
  std::vector<Outcome> outcomes(3);
  for (int i = 0; i < 3; ++i)
    spawn(io, wait_in(connection, small, queue, open, i, outcomes[i]));
  run(io, 5ms);
  CHECK(small.size() == 2);
  CHECK(error_code_of(outcomes[2]) == "resource_exhausted");
  CHECK(outcomes[2].reply->meta.find("max_waiting_per_connection = 2") != std::string::npos);
  small.cancel_all(CancelReason::connection_closed);
  run(io, 5ms);
  CHECK(small.empty());
}
